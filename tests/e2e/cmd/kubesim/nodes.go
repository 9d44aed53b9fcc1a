package main

// Simulated GPU nodes. The layout is a pure function of the node's index, so
// every run, test and benchmark sees the same cluster:
//
//	index % 3        0: 8x H100 NVSwitch (dgx-h100 capture), nvidia.com/gpu.clique
//	                 1: 8x V100 hybrid cube-mesh (dgx1-v100 capture)
//	                 2: 8x L40S PCIe, two sockets (pcie-2s capture)
//	index % 20 == 17 tainted rig.troupe.io/maintenance=true:NoSchedule
//	index % 20 == 18 cordoned (spec.unschedulable)
//	index % 20 == 19 one GPU unhealthy: allocatable 7 of capacity 8
//	index / 16       rack   (network.topology.nvidia.com/block)
//	index / 256      spine  (network.topology.nvidia.com/spine)
//	index / 2048     zone   (topology.kubernetes.io/zone)
//
// Every node carries rig.troupe.io/kind and rig.troupe.io/index, so a test
// can aim a pod at one kind of board or one node.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

type boardKind struct {
	name, product, topoFile string
}

var boards = []boardKind{
	{"h100", "NVIDIA-H100-80GB-HBM3", "dgx-h100.txt"},
	{"v100", "Tesla-V100-SXM2-32GB", "dgx1-v100.txt"},
	{"pcie", "NVIDIA-L40S", "pcie-2s.txt"},
}

// NodeName is the name of the simulated node with this index.
func nodeName(i int) string { return fmt.Sprintf("gpu-%04d", i) }

func simNode(i int, topo map[string]string, kubeletVersion string) *corev1.Node {
	b := boards[i%len(boards)]
	gpus := int64(8)
	alloc := gpus
	labels := map[string]string{
		"kubernetes.io/hostname":             nodeName(i),
		"kubernetes.io/os":                   "linux",
		"kubernetes.io/arch":                 "amd64",
		"node.kubernetes.io/instance-type":   "rig-" + b.name,
		"topology.kubernetes.io/region":      "rig",
		"topology.kubernetes.io/zone":        fmt.Sprintf("zone-%d", i/2048),
		"network.topology.nvidia.com/spine":  fmt.Sprintf("spine-%d", i/256),
		"network.topology.nvidia.com/block":  fmt.Sprintf("rack-%d", i/16),
		"nvidia.com/gpu.present":             "true",
		"nvidia.com/gpu.product":             b.product,
		"nvidia.com/gpu.count":               strconv.FormatInt(gpus, 10),
		"rig.troupe.io/kind":                 b.name,
		"rig.troupe.io/index":                strconv.Itoa(i),
	}
	if b.name == "h100" {
		labels["nvidia.com/gpu.clique"] = fmt.Sprintf("rig.%d", i/48)
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        nodeName(i),
			Labels:      labels,
			Annotations: map[string]string{"troupe.io/gpu-topology": topo[b.topoFile]},
		},
	}
	switch i % 20 {
	case 17:
		n.Spec.Taints = []corev1.Taint{{Key: "rig.troupe.io/maintenance", Value: "true",
			Effect: corev1.TaintEffectNoSchedule}}
	case 18:
		n.Spec.Unschedulable = true
	case 19:
		alloc = gpus - 1
	}
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	n.Status = corev1.NodeStatus{
		Capacity: corev1.ResourceList{
			"cpu": q("96"), "memory": q("1536Gi"), "pods": q("110"),
			"ephemeral-storage": q("3500Gi"),
			"nvidia.com/gpu":    *resource.NewQuantity(gpus, resource.DecimalSI),
		},
		Allocatable: corev1.ResourceList{
			"cpu": q("95"), "memory": q("1500Gi"), "pods": q("110"),
			"ephemeral-storage": q("3400Gi"),
			"nvidia.com/gpu":    *resource.NewQuantity(alloc, resource.DecimalSI),
		},
		Phase: corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubesim: simulated node"),
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", ""),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", ""),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", ""),
		},
		// Only a label: nothing connects to a simulated node.
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
			{Type: corev1.NodeHostName, Address: nodeName(i)}},
		NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubeletVersion, OperatingSystem: "linux",
			Architecture: "amd64", ContainerRuntimeVersion: "kubesim://0",
			OSImage: "kubesim", KernelVersion: "0"},
	}
	return n
}

func cond(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
	now := metav1.Now()
	return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg,
		LastHeartbeatTime: now, LastTransitionTime: now}
}

func loadTopologies(dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, b := range boards {
		data, err := os.ReadFile(filepath.Join(dir, b.topoFile))
		if err != nil {
			return nil, fmt.Errorf("topology capture: %w", err)
		}
		out[b.topoFile] = string(data)
	}
	return out, nil
}

func runNodes(args []string) error {
	fs := flag.NewFlagSet("nodes", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "admin kubeconfig of the cluster (required)")
	count := fs.Int("count", 20, "how many nodes to create")
	first := fs.Int("first", 0, "index of the first node")
	topoDir := fs.String("topo-dir", "tests/data/topo", "folder of nvidia-smi topo -m captures")
	workers := fs.Int("workers", 16, "concurrent creates")
	version := fs.String("kubelet-version", "v1.37.2", "status.nodeInfo.kubeletVersion to report")
	fs.Parse(args)
	cs, err := clientset(*kubeconfig, 400)
	if err != nil {
		return err
	}
	topo, err := loadTopologies(*topoDir)
	if err != nil {
		return err
	}
	ctx := context.Background()
	start := time.Now()
	var next atomic.Int64
	next.Store(int64(*first))
	var wg sync.WaitGroup
	errs := make(chan error, *workers)
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= *first+*count {
					return
				}
				if err := createNode(ctx, cs, simNode(i, topo, *version)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Printf("kubesim: %d nodes ready (%s .. %s) in %.1fs\n", *count, nodeName(*first),
		nodeName(*first+*count-1), time.Since(start).Seconds())
	return nil
}

// createNode creates the node with its status, or, if it exists (up run twice),
// puts the simulated state back.
func createNode(ctx context.Context, cs kubernetes.Interface, n *corev1.Node) error {
	made, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err == nil {
		return untaintNotReady(ctx, cs, made, n.Spec.Taints)
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	old, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s: %w", n.Name, err)
	}
	n.ResourceVersion = old.ResourceVersion
	up, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update node %s: %w", n.Name, err)
	}
	n.ResourceVersion = up.ResourceVersion
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update node %s status: %w", n.Name, err)
	}
	return nil
}

// untaintNotReady takes off the node.kubernetes.io/not-ready taint that the
// API server's TaintNodesByCondition admission puts on every new node. The
// node-lifecycle controller would remove it once the node reports Ready; the
// rig runs without that controller, so kubesim does its part here.
func untaintNotReady(ctx context.Context, cs kubernetes.Interface, made *corev1.Node,
	want []corev1.Taint) error {
	if len(made.Spec.Taints) == len(want) {
		return nil
	}
	for {
		made.Spec.Taints = want
		_, err := cs.CoreV1().Nodes().Update(ctx, made, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("untaint node %s: %w", made.Name, err)
		}
		if made, err = cs.CoreV1().Nodes().Get(ctx, made.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("get node %s: %w", made.Name, err)
		}
	}
}
