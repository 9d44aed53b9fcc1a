package main

// The end-to-end benchmark's workload, after upstream scheduler_perf's
// SchedulingBasic: create M GPU pods (in bulk, or at a steady rate), watch them
// until every one is bound, and report throughput and latency measured on the
// watch side. API timestamps have one-second resolution, so each pod's
// latency is the time from just before its create call to the watch event
// that first shows its spec.nodeName, both on this program's clock.
//
// With --hold the pods are created first and counted from the moment a file
// appears (bench/e2e starts kube-scheduler then): a backlog to drain.
//
// Throughput is reported two ways. pods_per_second follows scheduler_perf's
// throughput collector (test/integration/scheduler_perf/util.go): the pods bound
// in each whole second from the first bind on, averaged over those seconds (its
// "Average"; a second with no bind is merged into the next, as there). A run
// too short for one whole second falls back to overall_pods_per_second: every
// pod bound over the time from the first create call to the last bind.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

type benchResult struct {
	Workload      string  `json:"workload"`
	Pods          int     `json:"pods"`
	Scheduled     int     `json:"scheduled"`
	Seconds       float64 `json:"seconds"`
	PodsPerSecond float64 `json:"pods_per_second"`
	Overall       float64 `json:"overall_pods_per_second"`
	Windows       int     `json:"throughput_windows"`
	CreateSeconds float64 `json:"create_seconds"`
	FirstBoundS   float64 `json:"first_bound_seconds"`
	P50ms         float64 `json:"p50_ms"`
	P90ms         float64 `json:"p90_ms"`
	P99ms         float64 `json:"p99_ms"`
	TimedOut      bool    `json:"timed_out"`
}

func runBench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "admin kubeconfig of the cluster (required)")
	ns := fs.String("namespace", "bench", "namespace to create the pods in (created if missing)")
	pods := fs.Int("pods", 1000, "single pods to create (workload single)")
	gpus := fs.Int("gpus", 1, "GPUs each single pod asks for")
	rate := fs.Float64("rate", 0, "pods created per second; 0 creates them all at once (bulk)")
	gangs := fs.Int("gangs", 0, "gangs to create instead of single pods (workload gang)")
	gangSize := fs.Int("gang-size", 8, "pods per gang")
	gangGPUs := fs.Int("gang-gpus", 8, "GPUs per gang pod")
	workers := fs.Int("workers", 32, "concurrent create calls")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up waiting for binds after this long")
	qps := fs.Float64("qps", 1000, "API requests per second at most")
	hold := fs.String("hold", "", "after creating every pod, wait until this file exists "+
		"before counting (bench/e2e's backlog: the pods are created while kube-scheduler "+
		"is stopped, and it is started when the file appears); latency and throughput "+
		"are then measured from that moment")
	clean := fs.Bool("clean", false, "instead: delete every pod and PodGroup of the namespace "+
		"(grace period 0, --workers at a time) and wait until the pods are gone")
	fs.Parse(args)

	cfg, err := restConfig(*kubeconfig, float32(*qps))
	if err != nil {
		return err
	}
	cs, err := clientset(*kubeconfig, float32(*qps))
	if err != nil {
		return err
	}
	ctx := context.Background()
	if *clean {
		return cleanNamespace(ctx, cs, cfg, *ns, *workers, *timeout)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: *ns}}, metav1.CreateOptions{}); err != nil &&
		!apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", *ns, err)
	}
	// The namespace controller creates the default service account, which
	// admission needs before any pod of the namespace can be created.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, err := cs.CoreV1().ServiceAccounts(*ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s has no default service account after 1 minute: %w", *ns, err)
		}
	}

	var objs []*corev1.Pod
	workload := "single"
	if *gangs > 0 {
		workload = "gang"
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return err
		}
		gvr := schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1",
			Resource: "podgroups"}
		for g := 0; g < *gangs; g++ {
			name := fmt.Sprintf("gang-%03d", g)
			pg := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
				"metadata": map[string]any{"name": name, "namespace": *ns},
				"spec":     map[string]any{"minMember": int64(*gangSize)},
			}}
			if _, err := dyn.Resource(gvr).Namespace(*ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil &&
				!apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("podgroup %s: %w", name, err)
			}
			for m := 0; m < *gangSize; m++ {
				p := gpuPod(*ns, fmt.Sprintf("%s-%d", name, m), *gangGPUs)
				p.Labels["scheduling.x-k8s.io/pod-group"] = name
				objs = append(objs, p)
			}
		}
	} else {
		for i := 0; i < *pods; i++ {
			objs = append(objs, gpuPod(*ns, fmt.Sprintf("pod-%05d", i), *gpus))
		}
	}

	var mu sync.Mutex
	created := make(map[string]time.Time, len(objs))
	bound := make(map[string]time.Time, len(objs))
	done := make(chan struct{})
	var closed atomic.Bool
	seen := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		mu.Lock()
		if _, had := bound[p.Name]; !had {
			bound[p.Name] = now
			if len(bound) == len(objs) && closed.CompareAndSwap(false, true) {
				close(done)
			}
		}
		mu.Unlock()
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(*ns))
	inf := f.Core().V1().Pods().Informer()
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen,
		UpdateFunc: func(_, o any) { seen(o) }})
	stop := make(chan struct{})
	defer close(stop)
	f.Start(stop)
	cache.WaitForCacheSync(stop, inf.HasSynced)

	start := time.Now()
	work := make(chan *corev1.Pod)
	var wg sync.WaitGroup
	var createErr atomic.Value
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				t := time.Now()
				mu.Lock()
				created[p.Name] = t
				mu.Unlock()
				if _, err := cs.CoreV1().Pods(*ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					createErr.Store(fmt.Errorf("create pod %s: %w", p.Name, err))
				}
			}
		}()
	}
	for i, p := range objs {
		if *rate > 0 {
			due := start.Add(time.Duration(float64(i) / *rate * float64(time.Second)))
			time.Sleep(time.Until(due))
		}
		work <- p
	}
	close(work)
	wg.Wait()
	createdAll := time.Since(start)
	if e, ok := createErr.Load().(error); ok {
		return e
	}
	if *hold != "" {
		fmt.Fprintf(os.Stderr, "kubesim bench: %d pods created in %.1fs; waiting for %s\n",
			len(objs), createdAll.Seconds(), *hold)
		for {
			if _, err := os.Stat(*hold); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		start = time.Now()
		mu.Lock()
		for name := range created {
			created[name] = start
		}
		mu.Unlock()
	}
	timedOut := false
	select {
	case <-done:
	case <-time.After(*timeout):
		timedOut = true
	}

	mu.Lock()
	defer mu.Unlock()
	var lat []float64
	var times []time.Time
	last := start
	for name, b := range bound {
		if c, ok := created[name]; ok {
			lat = append(lat, float64(b.Sub(c).Microseconds())/1000)
		}
		times = append(times, b)
		if b.After(last) {
			last = b
		}
	}
	sort.Float64s(lat)
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	res := benchResult{Workload: workload, Pods: len(objs), Scheduled: len(bound),
		Seconds: last.Sub(start).Seconds(), TimedOut: timedOut,
		P50ms: quantile(lat, 0.50), P90ms: quantile(lat, 0.90), P99ms: quantile(lat, 0.99)}
	res.CreateSeconds = createdAll.Seconds()
	if res.Seconds > 0 {
		res.Overall = float64(res.Scheduled) / res.Seconds
	}
	res.PodsPerSecond = res.Overall
	if len(times) > 0 {
		first := times[0]
		res.FirstBoundS = first.Sub(start).Seconds()
		// Whole one-second windows from the first bind; the last, partial one
		// is left out, as the collector stops sampling when the pods are done.
		windows := int(last.Sub(first) / time.Second)
		if windows >= 1 {
			end := first.Add(time.Duration(windows) * time.Second)
			n := sort.Search(len(times), func(i int) bool { return !times[i].Before(end) })
			res.Windows = windows
			res.PodsPerSecond = float64(n) / float64(windows)
		}
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// cleanNamespace deletes the namespace's pods in parallel (the API server's
// deletecollection deletes one at a time) and its PodGroups, then waits until
// no pod is left.
func cleanNamespace(ctx context.Context, cs kubernetes.Interface, cfg *rest.Config, ns string,
	workers int, timeout time.Duration) error {
	start := time.Now()
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	zero := int64(0)
	work := make(chan string)
	var wg sync.WaitGroup
	var delErr atomic.Value
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range work {
				err := cs.CoreV1().Pods(ns).Delete(ctx, name,
					metav1.DeleteOptions{GracePeriodSeconds: &zero})
				if err != nil && !apierrors.IsNotFound(err) {
					delErr.Store(fmt.Errorf("delete pod %s: %w", name, err))
				}
			}
		}()
	}
	for _, p := range list.Items {
		work <- p.Name
	}
	close(work)
	wg.Wait()
	if e, ok := delErr.Load().(error); ok {
		return e
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1",
		Resource: "podgroups"}
	if err := dyn.Resource(gvr).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete podgroups: %w", err)
	}
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		left, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return fmt.Errorf("list pods: %w", err)
		}
		if len(left.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pods of %s still there after %s", ns, timeout)
		}
	}
	fmt.Fprintf(os.Stderr, "kubesim bench: %d pods of %s deleted in %.1fs\n", len(list.Items), ns,
		time.Since(start).Seconds())
	return nil
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	return sorted[i]
}

func gpuPod(ns, name string, gpus int) *corev1.Pod {
	g := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "work", Image: "registry.invalid/bench:1",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{"cpu": resource.MustParse("100m"),
						"memory": resource.MustParse("128Mi"), "nvidia.com/gpu": g},
					Limits: corev1.ResourceList{"nvidia.com/gpu": g},
				}}},
			TerminationGracePeriodSeconds: ptr(int64(0)),
		},
	}
}
