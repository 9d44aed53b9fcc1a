// The device manager, the admission that calls it, the PodResources server
// answering from it, and the commands (see the protocol in main.go).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe" // go:linkname, and reading two unexported fields (internals)

	cadvisorapi "github.com/google/cadvisor/lib/model"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/cri-client/pkg/util"
	"k8s.io/klog/v2"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	apisgrpc "k8s.io/kubernetes/pkg/kubelet/apis/grpc"
	"k8s.io/kubernetes/pkg/kubelet/apis/podresources"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// newManagerImpl is the device manager's own constructor, which
// NewManagerImpl calls with the fixed /var/lib/kubelet/device-plugins/
// kubelet.sock. The linker refuses pull linknames only into the standard
// library; this one is checked at every build (a changed signature fails the
// tests at the first call, a removed function fails the link).
//
//go:linkname newManagerImpl k8s.io/kubernetes/pkg/kubelet/cm/devicemanager.newManagerImpl
func newManagerImpl(logger klog.Logger, socketPath string, topology []cadvisorapi.Node,
	topologyAffinityStore topologymanager.Store) (*devicemanager.ManagerImpl, error)

// The registration socket's name in the directory, as the kubelet's.
const registrationSocketName = "kubelet.sock"

// harness is one running tool. Commands come one at a time from main's loop;
// the PodResources server's handlers run concurrently with them and reach
// the manager through current().
type harness struct {
	dir, prSocket, resource string
	logger                  klog.Logger

	// mgrMu guards mgr and topo; restart holds it for writing while it
	// swaps managers, so a PodResources request waits for the new one.
	mgrMu sync.RWMutex
	mgr   *devicemanager.ManagerImpl
	topo  topologymanager.Manager
	drain chan struct{} // closed to end the goroutine reading mgr.Updates()

	// podsMu guards pods only: the manager calls activePods from inside
	// Allocate and UpdateAllocatedDevices, so it is never held around a call
	// into the manager.
	podsMu sync.Mutex
	pods   []*corev1.Pod // admission order

	prServer *grpc.Server
	prDone   chan error
}

func (h *harness) registrationSocket() string { return filepath.Join(h.dir, registrationSocketName) }

func (h *harness) current() *devicemanager.ManagerImpl {
	h.mgrMu.RLock()
	defer h.mgrMu.RUnlock()
	return h.mgr
}

// alwaysReady is config.SourcesReady of a kubelet whose pod sources have all
// been seen: UpdateAllocatedDevices frees devices of pods no longer active,
// and devicesToAllocate never takes the "kubelet restarted, container still
// running" shortcut.
type alwaysReady struct{}

func (alwaysReady) AddSource(string) {}
func (alwaysReady) AllReady() bool   { return true }

// startManager makes and starts a manager on h.dir, with a topology manager
// of the kubelet's default policy ("none") as its affinity store and as the
// admission that calls it, in the order the kubelet's container manager
// wires them (NewContainerManager).
func (h *harness) startManager() error {
	topo, err := topologymanager.NewManager(h.logger, nil, topologymanager.PolicyNone,
		topologymanager.ContainerTopologyScope, nil)
	if err != nil {
		return fmt.Errorf("topology manager: %w", err)
	}
	mgr, err := newManagerImpl(h.logger, h.registrationSocket(), nil, topo)
	if err != nil {
		return fmt.Errorf("device manager on %s: %w", h.registrationSocket(), err)
	}
	topo.AddHintProvider(h.logger, mgr)
	if err := mgr.Start(h.logger, h.activePods, alwaysReady{}, containermap.NewContainerMap(), sets.New[string]()); err != nil {
		return fmt.Errorf("starting the device manager on %s: %w", h.registrationSocket(), err)
	}
	// The kubelet's sync loop reads Updates (ResourceHealthStatus); unread,
	// the manager logs an error at each health change once 100 are queued.
	drain := make(chan struct{})
	go func() {
		for {
			select {
			case u := <-mgr.Updates():
				h.logger.V(2).Info("devicemanager: health update for pods", "podUIDs", u.PodUIDs)
			case <-drain:
				return
			}
		}
	}()
	h.mgr, h.topo, h.drain = mgr, topo, drain
	return nil
}

// stopManager stops the running manager. h.mgr keeps pointing at it, so a
// PodResources request during a failed restart gets the stopped manager's
// answers rather than a nil pointer.
func (h *harness) stopManager() {
	if h.drain == nil {
		return
	}
	if err := h.mgr.Stop(h.logger); err != nil {
		h.logger.Error(err, "devicemanager: stopping the device manager")
	}
	close(h.drain)
	h.drain = nil
}

// start makes the directory, starts the manager and then the PodResources
// server (as the podresources tool and pkg/kubelet/server
// ListenAndServePodResources build it).
func start(ctx context.Context, dir, prSocket, resource string) (*harness, error) {
	h := &harness{dir: dir, prSocket: prSocket, resource: resource, logger: klog.FromContext(ctx)}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("--dir %s: %w", dir, err)
	}
	if err := h.startManager(); err != nil {
		return nil, err
	}
	all := podresources.PodResourcesProviders{
		Pods: podsProvider{h}, Devices: devicesProvider{h}, Cpus: none{}, Memory: none{}, DynamicResources: none{},
	}
	// The server lives as long as the tool, not as long as ctx (a signal
	// ends ctx; shutdown then stops the server itself).
	srvCtx := klog.NewContext(context.Background(), h.logger)
	h.prServer = grpc.NewServer(apisgrpc.WithRateLimiter(srvCtx, "podresources",
		podresources.DefaultQPS, podresources.DefaultBurstTokens))
	podresourcesv1.RegisterPodResourcesListerServer(h.prServer, podresources.NewV1PodResourcesServer(srvCtx, all))
	l, err := util.CreateListener("unix://" + prSocket)
	if err != nil {
		h.stopManager()
		return nil, fmt.Errorf("--pod-resources-socket: listening on %s: %w", prSocket, err)
	}
	h.prDone = make(chan error, 1)
	go func() { h.prDone <- h.prServer.Serve(l) }()
	return h, nil
}

// shutdown stops the PodResources server (gracefully for 5 s), then the
// manager, and removes the PodResources socket.
func (h *harness) shutdown() {
	stopped := make(chan struct{})
	go func() { h.prServer.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		h.prServer.Stop()
		<-stopped
	}
	<-h.prDone
	if err := os.Remove(h.prSocket); err != nil && !os.IsNotExist(err) {
		h.logger.Error(err, "devicemanager: removing the PodResources socket", "socket", h.prSocket)
	}
	h.mgrMu.Lock()
	h.stopManager()
	h.mgrMu.Unlock()
	// The registration server's listener unlinks its socket on close;
	// make sure, since a stale socket would look like a live kubelet.
	os.Remove(h.registrationSocket())
}

// --- the pod manager's part ---

func (h *harness) activePods() []*corev1.Pod {
	h.podsMu.Lock()
	defer h.podsMu.Unlock()
	return append([]*corev1.Pod(nil), h.pods...)
}

func (h *harness) findPod(match func(*corev1.Pod) bool) *corev1.Pod {
	h.podsMu.Lock()
	defer h.podsMu.Unlock()
	for _, p := range h.pods {
		if match(p) {
			return p
		}
	}
	return nil
}

func (h *harness) dropPod(uid string) bool {
	h.podsMu.Lock()
	defer h.podsMu.Unlock()
	for i, p := range h.pods {
		if string(p.UID) == uid {
			h.pods = append(h.pods[:i:i], h.pods[i+1:]...)
			return true
		}
	}
	return false
}

// podsProvider: every admitted pod is running, so the active pods are all of
// them (List under KubeletPodResourcesListUseActivePods).
type podsProvider struct{ h *harness }

func (p podsProvider) GetActivePods() []*corev1.Pod { return p.h.activePods() }
func (p podsProvider) GetPods() []*corev1.Pod       { return p.h.activePods() }
func (p podsProvider) GetPodByName(namespace, name string) (*corev1.Pod, bool) {
	pod := p.h.findPod(func(q *corev1.Pod) bool { return q.Namespace == namespace && q.Name == name })
	return pod, pod != nil
}

// devicesProvider is the kubelet container manager's part
// (pkg/kubelet/cm/container_manager_linux.go): the device manager's answers
// turned into the API's lists.
type devicesProvider struct{ h *harness }

func (d devicesProvider) UpdateAllocatedDevices(logger klog.Logger) {
	d.h.current().UpdateAllocatedDevices(logger)
}
func (d devicesProvider) GetDevices(podUID, containerName string) []*podresourcesv1.ContainerDevices {
	return containerDevices(d.h.current().GetDevices(podUID, containerName))
}
func (d devicesProvider) GetAllocatableDevices(logger klog.Logger) []*podresourcesv1.ContainerDevices {
	return containerDevices(d.h.current().GetAllocatableDevices(logger))
}

// containerDevices is containerDevicesFromResourceDeviceInstances of
// pkg/kubelet/cm/container_manager.go: one entry per device, and per NUMA
// node for a device that reports topology; map order.
func containerDevices(devs devicemanager.ResourceDeviceInstances) []*podresourcesv1.ContainerDevices {
	var out []*podresourcesv1.ContainerDevices
	for resourceName, resourceDevs := range devs {
		for devID, dev := range resourceDevs {
			topo := dev.GetTopology()
			if topo == nil {
				out = append(out, &podresourcesv1.ContainerDevices{ResourceName: resourceName, DeviceIds: []string{devID}})
				continue
			}
			for _, node := range topo.GetNodes() {
				out = append(out, &podresourcesv1.ContainerDevices{
					ResourceName: resourceName,
					DeviceIds:    []string{devID},
					Topology:     &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: node.GetID()}}},
				})
			}
		}
	}
	return out
}

// none: CPUs, memory and dynamic resources, empty as on a kubelet with the
// "none" CPU and memory manager policies and no DRA claims.
type none struct{}

func (none) GetCPUs(*corev1.Pod, *corev1.Container) []int64 { return nil }
func (none) GetPodCPUs(string) []int64                      { return nil }
func (none) GetAllocatableCPUs() []int64                    { return nil }
func (none) GetMemory(klog.Logger, *corev1.Pod, *corev1.Container) []*podresourcesv1.ContainerMemory {
	return nil
}
func (none) GetPodMemory(klog.Logger, string) []*podresourcesv1.ContainerMemory { return nil }
func (none) GetAllocatableMemory(klog.Logger) []*podresourcesv1.ContainerMemory { return nil }
func (none) GetDynamicResources(klog.Logger, *corev1.Pod, *corev1.Container) []*podresourcesv1.DynamicResource {
	return nil
}

// --- what the manager does not export ---

// internals reads, under the manager's own mutex, the two things no method
// tells: the ids it holds as unhealthy for resource (GetCapacity counts them,
// GetAllocatableDevices leaves them out) and whether resource's endpoint is a
// live plugin (stopTime zero) rather than one whose ListAndWatch ended or one
// restored from the checkpoint. By field name, so a release that renames them
// fails here with an error rather than answering wrongly.
func internals(m *devicemanager.ManagerImpl, resource string) (unhealthy []string, connected bool, err error) {
	v := reflect.ValueOf(m).Elem()
	field := func(s reflect.Value, name string, kind reflect.Kind) (reflect.Value, error) {
		f := s.FieldByName(name)
		if !f.IsValid() || f.Kind() != kind {
			return f, fmt.Errorf("device manager internals changed: no %s field %q in %s", kind, name, s.Type())
		}
		return f, nil
	}
	muField, err := field(v, "mutex", reflect.Struct)
	if err != nil {
		return nil, false, err
	}
	if muField.Type() != reflect.TypeOf(sync.Mutex{}) {
		return nil, false, fmt.Errorf("device manager internals changed: mutex is a %s", muField.Type())
	}
	unhealthyField, err := field(v, "unhealthyDevices", reflect.Map)
	if err != nil {
		return nil, false, err
	}
	endpointsField, err := field(v, "endpoints", reflect.Map)
	if err != nil {
		return nil, false, err
	}
	mu := (*sync.Mutex)(unsafe.Pointer(muField.UnsafeAddr()))
	mu.Lock()
	defer mu.Unlock()
	if set := unhealthyField.MapIndex(reflect.ValueOf(resource)); set.IsValid() {
		for _, k := range set.MapKeys() {
			unhealthy = append(unhealthy, k.String())
		}
	}
	sort.Strings(unhealthy)
	info := endpointsField.MapIndex(reflect.ValueOf(resource))
	if !info.IsValid() {
		return unhealthy, false, nil
	}
	e, err := field(info, "e", reflect.Interface)
	if err != nil || e.IsNil() {
		return unhealthy, false, err
	}
	impl := e.Elem()
	if impl.Kind() != reflect.Pointer || impl.Elem().Kind() != reflect.Struct {
		return nil, false, fmt.Errorf("device manager internals changed: endpoint is a %s", impl.Type())
	}
	stop, err := field(impl.Elem(), "stopTime", reflect.Struct)
	if err != nil {
		return nil, false, err
	}
	if stop.Type() != reflect.TypeOf(time.Time{}) {
		return nil, false, fmt.Errorf("device manager internals changed: stopTime is a %s", stop.Type())
	}
	// setStopTime runs with the manager's mutex held (PluginDisconnected).
	return unhealthy, (*time.Time)(unsafe.Pointer(stop.UnsafeAddr())).IsZero(), nil
}

// --- the commands ---

type command struct {
	Op          string          `json:"op"`
	Resource    string          `json:"resource,omitempty"`
	Allocatable *int64          `json:"allocatable,omitempty"`
	Capacity    *int64          `json:"capacity,omitempty"`
	Connected   *bool           `json:"connected,omitempty"`
	TimeoutS    *float64        `json:"timeout_s,omitempty"`
	Pod         json.RawMessage `json:"pod,omitempty"`
	UID         string          `json:"uid,omitempty"`
}

type answer map[string]any

func failed(format string, args ...any) answer {
	return answer{"ok": false, "error": fmt.Sprintf(format, args...)}
}

// strictDecode refuses unknown fields and trailing data, so a typo in a test
// is an error rather than a field silently left out.
func strictDecode(data []byte, into any) error {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON object")
	}
	return nil
}

// command runs one line; quit says the loop ends after its answer.
func (h *harness) command(ctx context.Context, line []byte) (answer, bool) {
	var c command
	if err := strictDecode(line, &c); err != nil {
		return failed("not a command: %v", err), false
	}
	used := func(allowed ...string) error {
		set := map[string]bool{}
		for _, a := range allowed {
			set[a] = true
		}
		for name, given := range map[string]bool{
			"resource": c.Resource != "", "allocatable": c.Allocatable != nil, "capacity": c.Capacity != nil,
			"connected": c.Connected != nil, "timeout_s": c.TimeoutS != nil, "pod": c.Pod != nil, "uid": c.UID != "",
		} {
			if given && !set[name] {
				return fmt.Errorf("op %q takes no %q", c.Op, name)
			}
		}
		return nil
	}
	var err error
	switch c.Op {
	case "capacity":
		if err = used("resource"); err == nil {
			return h.capacity(c.resourceOr(h.resource)), false
		}
	case "wait":
		if err = used("resource", "allocatable", "capacity", "connected", "timeout_s"); err == nil {
			return h.wait(ctx, &c), false
		}
	case "admit":
		if err = used("pod"); err == nil {
			return h.admit(ctx, c.Pod), false
		}
	case "remove":
		if err = used("uid"); err == nil {
			return h.remove(c.UID), false
		}
	case "restart":
		if err = used(); err == nil {
			return h.restart(), false
		}
	case "quit":
		if err = used(); err == nil {
			return answer{"ok": true}, true
		}
	case "":
		err = errors.New(`no "op"`)
	default:
		err = fmt.Errorf("unknown op %q (capacity, wait, admit, remove, restart, quit)", c.Op)
	}
	return failed("%v", err), false
}

func (c *command) resourceOr(def string) string {
	if c.Resource != "" {
		return c.Resource
	}
	return def
}

func (h *harness) capacity(resource string) answer {
	m := h.current()
	capacity, allocatable, deleted := m.GetCapacity(h.logger)
	healthy := []string{}
	for id := range m.GetAllocatableDevices(h.logger)[resource] {
		healthy = append(healthy, id)
	}
	sort.Strings(healthy)
	unhealthy, connected, err := internals(m, resource)
	if err != nil {
		return failed("%v", err)
	}
	if unhealthy == nil {
		unhealthy = []string{}
	}
	sort.Strings(deleted)
	if deleted == nil {
		deleted = []string{}
	}
	counts := func(l corev1.ResourceList) map[string]int64 {
		out := map[string]int64{}
		for name, q := range l {
			out[string(name)] = q.Value()
		}
		return out
	}
	_, registered := capacity[corev1.ResourceName(resource)]
	return answer{"ok": true, "capacity": counts(capacity), "allocatable": counts(allocatable),
		"healthy": healthy, "unhealthy": unhealthy, "registered": registered, "connected": connected,
		"deleted": deleted}
}

func (h *harness) wait(ctx context.Context, c *command) answer {
	if c.Allocatable == nil && c.Capacity == nil && c.Connected == nil {
		return failed(`wait needs at least one of "allocatable", "capacity", "connected"`)
	}
	timeout := 10 * time.Second
	if c.TimeoutS != nil {
		if *c.TimeoutS < 0 {
			return failed("timeout_s %v is negative", *c.TimeoutS)
		}
		timeout = time.Duration(*c.TimeoutS * float64(time.Second))
	}
	resource := c.resourceOr(h.resource)
	deadline := time.Now().Add(timeout)
	for {
		a := h.capacity(resource)
		if a["ok"] != true {
			return a
		}
		var unmet []string
		if got := a["allocatable"].(map[string]int64)[resource]; c.Allocatable != nil && got != *c.Allocatable {
			unmet = append(unmet, fmt.Sprintf("allocatable %d, want %d", got, *c.Allocatable))
		}
		if got := a["capacity"].(map[string]int64)[resource]; c.Capacity != nil && got != *c.Capacity {
			unmet = append(unmet, fmt.Sprintf("capacity %d, want %d", got, *c.Capacity))
		}
		if got := a["connected"].(bool); c.Connected != nil && got != *c.Connected {
			unmet = append(unmet, fmt.Sprintf("connected %v, want %v", got, *c.Connected))
		}
		if len(unmet) == 0 {
			return a
		}
		if !time.Now().Before(deadline) {
			a["ok"] = false
			a["error"] = fmt.Sprintf("timed out after %v waiting on %s: %s", timeout, resource, strings.Join(unmet, ", "))
			return a
		}
		select {
		case <-ctx.Done():
			a["ok"] = false
			a["error"] = "interrupted while waiting"
			return a
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// admittedPod makes the pod manager's copy of a pod the kubelet has started:
// phase Running, every container running, so the PodResources server's
// filters of inactive pods keep it.
func admittedPod(pod *corev1.Pod) {
	now := metav1.NewTime(time.Now())
	if pod.CreationTimestamp.IsZero() {
		pod.CreationTimestamp = now
	}
	yes := true
	running := func(c corev1.Container) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: c.Name, Ready: true, Started: &yes, Image: c.Image,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now}
	for _, c := range pod.Spec.InitContainers {
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, running(c))
	}
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, running(c))
	}
}

func (h *harness) admit(ctx context.Context, raw json.RawMessage) answer {
	pod := &corev1.Pod{}
	if err := strictDecode(raw, pod); err != nil {
		return failed("pod: not a v1.Pod: %v", err)
	}
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	key := pod.Namespace + "/" + pod.Name
	if pod.Name == "" || pod.UID == "" {
		return failed("pod %s: metadata.name and metadata.uid must be set", key)
	}
	if len(pod.Spec.Containers) == 0 {
		return failed("pod %s: spec.containers is empty", key)
	}
	names := map[string]bool{}
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Name == "" || names[c.Name] {
			return failed("pod %s: container name %q is empty or appears twice", key, c.Name)
		}
		names[c.Name] = true
	}
	if other := h.findPod(func(p *corev1.Pod) bool { return p.UID == pod.UID }); other != nil {
		return failed("pod %s: uid %s is already admitted (pod %s/%s)", key, pod.UID, other.Namespace, other.Name)
	}
	if h.findPod(func(p *corev1.Pod) bool { return p.Namespace == pod.Namespace && p.Name == pod.Name }) != nil {
		return failed("pod %s is already admitted", key)
	}
	admittedPod(pod)

	// As HandlePodAdditions: the pod manager has the pod before admission,
	// so the manager's UpdateAllocatedDevices inside Allocate keeps it.
	h.podsMu.Lock()
	h.pods = append(h.pods, pod)
	h.podsMu.Unlock()
	h.mgrMu.RLock()
	mgr, topo := h.mgr, h.topo
	h.mgrMu.RUnlock()
	undo := func(a answer) answer {
		h.dropPod(string(pod.UID))
		mgr.UpdateAllocatedDevices(h.logger)
		return a
	}

	res := topo.Admit(ctx, &lifecycle.PodAdmitAttributes{Pod: pod, Operation: lifecycle.AddOperation})
	if !res.Admit {
		return undo(failed("pod %s: admission refused (%s): %s", key, res.Reason, res.Message))
	}
	var containers []answer
	add := func(c *corev1.Container, init bool) error {
		opts, err := mgr.GetDeviceRunContainerOptions(ctx, pod, c)
		if err != nil {
			return fmt.Errorf("pod %s container %s: GetDeviceRunContainerOptions: %w", key, c.Name, err)
		}
		containers = append(containers, containerAnswer(mgr.GetDevices(string(pod.UID), c.Name), opts, c.Name, init, h.resource))
		return nil
	}
	for i := range pod.Spec.InitContainers {
		if err := add(&pod.Spec.InitContainers[i], true); err != nil {
			return undo(failed("%v", err))
		}
	}
	for i := range pod.Spec.Containers {
		if err := add(&pod.Spec.Containers[i], false); err != nil {
			return undo(failed("%v", err))
		}
	}
	return answer{"ok": true, "containers": containers}
}

func containerAnswer(devs devicemanager.ResourceDeviceInstances, opts *devicemanager.DeviceRunContainerOptions,
	name string, init bool, resource string) answer {
	byResource := map[string][]string{}
	for r, ids := range devs {
		list := []string{}
		for id := range ids {
			list = append(list, id)
		}
		sort.Strings(list)
		byResource[r] = list
	}
	devices := byResource[resource]
	if devices == nil {
		devices = []string{}
	}
	envs, annotations := map[string]string{}, map[string]string{}
	cdi, mounts, specs := []string{}, []answer{}, []answer{}
	if opts != nil {
		for _, e := range opts.Envs {
			envs[e.Name] = e.Value
		}
		for _, a := range opts.Annotations {
			annotations[a.Name] = a.Value
		}
		for _, d := range opts.CDIDevices {
			cdi = append(cdi, d.Name)
		}
		for _, m := range opts.Mounts {
			mounts = append(mounts, answer{"container_path": m.ContainerPath, "host_path": m.HostPath, "read_only": m.ReadOnly})
		}
		for _, d := range opts.Devices {
			specs = append(specs, answer{"container_path": d.PathInContainer, "host_path": d.PathOnHost, "permissions": d.Permissions})
		}
	}
	return answer{"name": name, "init": init, "devices": devices, "resources": byResource, "envs": envs,
		"cdi": cdi, "annotations": annotations, "mounts": mounts, "device_specs": specs}
}

func (h *harness) remove(uid string) answer {
	if uid == "" {
		return failed(`remove needs "uid"`)
	}
	if !h.dropPod(uid) {
		return failed("no admitted pod has uid %s", uid)
	}
	h.current().UpdateAllocatedDevices(h.logger)
	return answer{"ok": true}
}

// restart is a kubelet restart as the device plugin sees it.
func (h *harness) restart() answer {
	h.mgrMu.Lock()
	defer h.mgrMu.Unlock()
	h.stopManager()
	entries, err := os.ReadDir(h.dir)
	if err != nil {
		return failed("restart: reading %s: %v", h.dir, err)
	}
	for _, e := range entries {
		if e.Type()&os.ModeSocket == 0 {
			continue
		}
		path := filepath.Join(h.dir, e.Name())
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return failed("restart: removing the socket %s: %v", path, err)
		}
	}
	if err := h.startManager(); err != nil {
		return failed("restart: %v", err)
	}
	if st, err := os.Stat(h.registrationSocket()); err != nil || st.Mode()&os.ModeSocket == 0 {
		return failed("restart: %s is not a socket after the manager started (%v)", h.registrationSocket(), err)
	}
	return answer{"ok": true}
}
