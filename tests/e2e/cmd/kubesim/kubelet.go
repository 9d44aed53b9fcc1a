package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

// RunSecondsAnnotation makes the simulated kubelet end a pod: Succeeded this
// many seconds after it was marked Running.
const runSecondsAnnotation = "rig.troupe.io/run-seconds"

func clientset(kubeconfig string, qps float32) (*kubernetes.Clientset, error) {
	cfg, err := restConfig(kubeconfig, qps)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func restConfig(kubeconfig string, qps float32) (*rest.Config, error) {
	if kubeconfig == "" {
		return nil, fmt.Errorf("--kubeconfig is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS = qps
	cfg.Burst = int(qps * 2)
	cfg.UserAgent = "kubesim"
	return cfg, nil
}

type kubelet struct {
	cs    kubernetes.Interface
	pods  cache.Indexer
	nodes cache.Indexer
	queue workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	started map[types.UID]time.Time // when this program marked the pod Running
}

func runKubelet(args []string) error {
	fs := flag.NewFlagSet("kubelet", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "admin kubeconfig of the cluster (required)")
	workers := fs.Int("workers", 8, "pods handled at once")
	qps := fs.Float64("qps", 500, "API requests per second at most")
	fs.Parse(args)
	cs, err := clientset(*kubeconfig, float32(*qps))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	f := informers.NewSharedInformerFactory(cs, 0)
	podInf := f.Core().V1().Pods().Informer()
	nodeInf := f.Core().V1().Nodes().Informer()
	k := &kubelet{
		cs: cs, pods: podInf.GetIndexer(), nodes: nodeInf.GetIndexer(),
		queue: workqueue.NewTypedRateLimitingQueue(
			workqueue.DefaultTypedControllerRateLimiter[string]()),
		started: map[types.UID]time.Time{},
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				k.mu.Lock()
				delete(k.started, p.UID)
				k.mu.Unlock()
			}
		},
	})
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, nodeInf.HasSynced) {
		return fmt.Errorf("informers did not sync")
	}
	log.SetOutput(os.Stderr)
	log.Printf("kubesim kubelet: watching pods on simulated nodes (%d workers)", *workers)
	var wg sync.WaitGroup
	for i := 0; i < *workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k.processOne(ctx) {
			}
		}()
	}
	<-ctx.Done()
	k.queue.ShutDown()
	wg.Wait()
	return nil
}

func (k *kubelet) processOne(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	requeue, err := k.sync(ctx, key)
	switch {
	case err != nil:
		log.Printf("kubesim kubelet: %s: %v (retrying)", key, err)
		k.queue.AddRateLimited(key)
	case requeue > 0:
		k.queue.Forget(key)
		k.queue.AddAfter(key, requeue)
	default:
		k.queue.Forget(key)
	}
	return true
}

func (k *kubelet) simulated(nodeName string) bool {
	obj, ok, _ := k.nodes.GetByKey(nodeName)
	if !ok {
		return false
	}
	_, sim := obj.(*corev1.Node).Labels["rig.troupe.io/kind"]
	return sim
}

// sync brings one pod one step closer to what a kubelet would make of it. It
// returns how long to wait before looking at the pod again, if it must.
func (k *kubelet) sync(ctx context.Context, key string) (time.Duration, error) {
	obj, ok, err := k.pods.GetByKey(key)
	if err != nil || !ok {
		return 0, err
	}
	pod := obj.(*corev1.Pod)
	if pod.Spec.NodeName == "" || !k.simulated(pod.Spec.NodeName) {
		return 0, nil
	}
	if pod.DeletionTimestamp != nil {
		// The containers are "stopped" at once: finish the deletion, as the
		// kubelet does with a zero grace period.
		zero := int64(0)
		err := k.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return 0, nil
		}
		return 0, err
	}
	switch pod.Status.Phase {
	case corev1.PodPending, "":
		return k.markRunning(ctx, pod)
	case corev1.PodRunning:
		return k.maybeComplete(ctx, pod)
	}
	return 0, nil
}

func (k *kubelet) markRunning(ctx context.Context, pod *corev1.Pod) (time.Duration, error) {
	now := metav1.Now()
	p := pod.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	p.Status.HostIP = "127.0.0.1"
	p.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	p.Status.PodIP = "127.0.0.1"
	p.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
	p.Status.StartTime = &now
	setCondition(p, corev1.PodInitialized, now)
	setCondition(p, corev1.ContainersReady, now)
	setCondition(p, corev1.PodReady, now)
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "kubesim://" + c.Image, Ready: true,
			Started: ptr(true), ContainerID: "kubesim://" + string(p.UID) + "/" + c.Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	if _, err := k.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, err
	}
	k.mu.Lock()
	k.started[p.UID] = time.Now()
	k.mu.Unlock()
	return runSeconds(p), nil
}

func runSeconds(p *corev1.Pod) time.Duration {
	v, ok := p.Annotations[runSecondsAnnotation]
	if !ok {
		return 0
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || s < 0 {
		log.Printf("kubesim kubelet: %s/%s: %s=%q is not a number of seconds; the pod runs for ever",
			p.Namespace, p.Name, runSecondsAnnotation, v)
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

func (k *kubelet) maybeComplete(ctx context.Context, pod *corev1.Pod) (time.Duration, error) {
	run := runSeconds(pod)
	if run == 0 {
		if _, ok := pod.Annotations[runSecondsAnnotation]; !ok {
			return 0, nil
		}
	}
	k.mu.Lock()
	since, ok := k.started[pod.UID]
	k.mu.Unlock()
	if !ok {
		// Marked Running before this program started: count from the status.
		since = time.Now()
		if pod.Status.StartTime != nil {
			since = pod.Status.StartTime.Time
		}
	}
	if left := run - time.Since(since); left > 0 {
		return left, nil
	}
	now := metav1.Now()
	p := pod.DeepCopy()
	p.Status.Phase = corev1.PodSucceeded
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady ||
			p.Status.Conditions[i].Type == corev1.ContainersReady {
			p.Status.Conditions[i].Status = corev1.ConditionFalse
			p.Status.Conditions[i].Reason = "PodCompleted"
			p.Status.Conditions[i].LastTransitionTime = now
		}
	}
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		started := now
		if cs.State.Running != nil {
			started = cs.State.Running.StartedAt
		}
		cs.Ready = false
		cs.Started = ptr(false)
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: now,
			ContainerID: cs.ContainerID}}
	}
	if _, err := k.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil &&
		!apierrors.IsNotFound(err) {
		return 0, err
	}
	return 0, nil
}

func setCondition(p *corev1.Pod, t corev1.PodConditionType, now metav1.Time) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			if p.Status.Conditions[i].Status != corev1.ConditionTrue {
				p.Status.Conditions[i].Status = corev1.ConditionTrue
				p.Status.Conditions[i].LastTransitionTime = now
			}
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
}

func ptr[T any](v T) *T { return &v }
