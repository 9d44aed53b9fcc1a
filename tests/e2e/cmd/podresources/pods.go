// The pods file and the providers the kubelet's PodResources server asks.
//
// The real server (k8s.io/kubernetes/pkg/kubelet/apis/podresources) reads
// everything it answers from five provider interfaces, which the kubelet
// backs with its pod manager and container manager. Here they are backed by
// a JSON file a test writes:
//
//	{"pods": [{"namespace": "ml", "name": "p", "uid": "u1",
//	           "containers": [{"name": "c", "devices": [
//	               {"resource": "nvidia.com/gpu", "ids": ["GPU-a", "GPU-b"]}]}]}],
//	 "allocatable": [{"resource": "nvidia.com/gpu", "ids": ["GPU-a", "GPU-b", "GPU-c"]}]}
//
// The file is read again at every request (see load in main.go), so a test
// changes what the "kubelet" reports by rewriting it between calls.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// The file's shape. Unknown fields are refused, so a typo ("device") is an
// error rather than a pod that silently has no devices.
type podsFile struct {
	Pods        []podEntry    `json:"pods"`
	Allocatable []deviceEntry `json:"allocatable"`
}

type podEntry struct {
	Namespace  string           `json:"namespace"`
	Name       string           `json:"name"`
	UID        string           `json:"uid"`
	Containers []containerEntry `json:"containers"`
}

type containerEntry struct {
	Name    string        `json:"name"`
	Devices []deviceEntry `json:"devices"`
}

type deviceEntry struct {
	Resource string   `json:"resource"`
	IDs      []string `json:"ids"`
}

// Device IDs by resource name, the shape of the kubelet device manager's
// ResourceDeviceInstances (pkg/kubelet/cm/devicemanager) without the
// per-device topology, which the file does not carry.
type deviceSet map[string]map[string]struct{}

// One reading of the file, in the form the providers answer from.
type snapshot struct {
	pods        []*corev1.Pod
	byName      map[string]*corev1.Pod          // "namespace/name"
	devices     map[string]map[string]deviceSet // pod UID -> container name -> devices
	allocatable deviceSet
}

// readPodsFile reads and checks the pods file. Any error names the entry at
// fault, so a test author sees which line of the file to fix.
func readPodsFile(path string) (*snapshot, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f podsFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a pods file: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("not a pods file: data after the JSON object")
	}
	return buildSnapshot(&f)
}

func buildSnapshot(f *podsFile) (*snapshot, error) {
	s := &snapshot{
		byName:  map[string]*corev1.Pod{},
		devices: map[string]map[string]deviceSet{},
	}
	var err error
	if s.allocatable, err = addDevices(deviceSet{}, f.Allocatable); err != nil {
		return nil, fmt.Errorf("allocatable: %w", err)
	}
	uids := map[string]bool{}
	for i, p := range f.Pods {
		where := fmt.Sprintf("pods[%d]", i)
		if p.Namespace == "" || p.Name == "" || p.UID == "" {
			return nil, fmt.Errorf("%s: namespace, name and uid must all be set", where)
		}
		key := p.Namespace + "/" + p.Name
		if s.byName[key] != nil {
			return nil, fmt.Errorf("%s: pod %s appears twice", where, key)
		}
		if uids[p.UID] {
			return nil, fmt.Errorf("%s: uid %q appears twice", where, p.UID)
		}
		uids[p.UID] = true
		if len(p.Containers) == 0 {
			return nil, fmt.Errorf("%s (%s): a pod has at least one container", where, key)
		}
		byContainer := map[string]deviceSet{}
		for j, c := range p.Containers {
			cwhere := fmt.Sprintf("%s (%s) containers[%d]", where, key, j)
			if c.Name == "" {
				return nil, fmt.Errorf("%s: name must be set", cwhere)
			}
			if byContainer[c.Name] != nil {
				return nil, fmt.Errorf("%s: container %q appears twice", cwhere, c.Name)
			}
			if byContainer[c.Name], err = addDevices(deviceSet{}, c.Devices); err != nil {
				return nil, fmt.Errorf("%s: %w", cwhere, err)
			}
		}
		pod := runningPod(&p)
		s.pods = append(s.pods, pod)
		s.byName[key] = pod
		s.devices[p.UID] = byContainer
	}
	return s, nil
}

// addDevices adds entries to set. One device ID twice under one resource is
// refused: the device manager never hands a device out twice.
func addDevices(set deviceSet, entries []deviceEntry) (deviceSet, error) {
	for i, d := range entries {
		if d.Resource == "" {
			return nil, fmt.Errorf("devices[%d]: resource must be set", i)
		}
		if set[d.Resource] == nil {
			set[d.Resource] = map[string]struct{}{}
		}
		for _, id := range d.IDs {
			if id == "" {
				return nil, fmt.Errorf("devices[%d] (%s): an empty device id", i, d.Resource)
			}
			if _, dup := set[d.Resource][id]; dup {
				return nil, fmt.Errorf("devices[%d] (%s): device %q appears twice", i, d.Resource, id)
			}
			set[d.Resource][id] = struct{}{}
		}
	}
	return set, nil
}

// runningPod makes the v1.Pod the kubelet's pod manager would hold for a
// started pod: phase Running and every container running, so the server's
// "active pods" view (terminal pods left out) keeps it.
func runningPod(p *podEntry) *corev1.Pod {
	started := metav1.NewTime(time.Now())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: types.UID(p.UID)},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	yes := true
	for _, c := range p.Containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c.Name, Image: "troupe.io/fake"})
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Ready: true, Started: &yes, Image: "troupe.io/fake",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		})
	}
	return pod
}

// containerDevices turns a set into the API's list the way the kubelet's
// container manager does (containerDevicesFromResourceDeviceInstances in
// pkg/kubelet/cm/container_manager.go, for devices without topology): one
// entry per device ID, in Go's map order, which differs between calls. A
// client must therefore merge entries by resource name and not rely on order.
func containerDevices(set deviceSet) []*podresourcesv1.ContainerDevices {
	var out []*podresourcesv1.ContainerDevices
	for resource, ids := range set {
		for id := range ids {
			out = append(out, &podresourcesv1.ContainerDevices{ResourceName: resource, DeviceIds: []string{id}})
		}
	}
	return out
}

// providers answers the real server from the snapshot load (main.go) put in
// place for the request being served; the server calls them only from its
// handlers, which load runs with the lock held.
type providers struct {
	snap *snapshot
}

// PodsProvider. Every pod in the file is running, so the active pods (what
// List returns under KubeletPodResourcesListUseActivePods) are all of them,
// and GetPodByName's filter of inactive pods keeps them too.
func (p *providers) GetActivePods() []*corev1.Pod { return p.snap.pods }
func (p *providers) GetPods() []*corev1.Pod       { return p.snap.pods }
func (p *providers) GetPodByName(namespace, name string) (*corev1.Pod, bool) {
	pod, ok := p.snap.byName[namespace+"/"+name]
	return pod, ok
}

// DevicesProvider. Nothing is ever freed: the file says what is allocated.
func (p *providers) UpdateAllocatedDevices(klog.Logger) {}
func (p *providers) GetDevices(podUID, containerName string) []*podresourcesv1.ContainerDevices {
	return containerDevices(p.snap.devices[podUID][containerName])
}
func (p *providers) GetAllocatableDevices(klog.Logger) []*podresourcesv1.ContainerDevices {
	return containerDevices(p.snap.allocatable)
}

// CPUsProvider, MemoryProvider, DynamicResourcesProvider: empty, as on a
// kubelet with the "none" CPU and memory manager policies and no DRA claims.
func (p *providers) GetCPUs(*corev1.Pod, *corev1.Container) []int64 { return nil }
func (p *providers) GetPodCPUs(string) []int64                      { return nil }
func (p *providers) GetAllocatableCPUs() []int64                    { return nil }
func (p *providers) GetMemory(klog.Logger, *corev1.Pod, *corev1.Container) []*podresourcesv1.ContainerMemory {
	return nil
}
func (p *providers) GetPodMemory(klog.Logger, string) []*podresourcesv1.ContainerMemory { return nil }
func (p *providers) GetAllocatableMemory(klog.Logger) []*podresourcesv1.ContainerMemory {
	return nil
}
func (p *providers) GetDynamicResources(klog.Logger, *corev1.Pod, *corev1.Container) []*podresourcesv1.DynamicResource {
	return nil
}
