// podresources serves the kubelet's PodResources API (v1, and v1alpha1 as
// the kubelet also does) on a Unix socket, with the kubelet's own server code
// of the pinned release, so troupe-node's client is tested against the real
// thing rather than against a reimplementation. Test tooling only.
//
//	podresources --socket PATH --pods FILE
//
// What runs is the release's: the List, GetAllocatableResources and Get
// handlers from k8s.io/kubernetes/pkg/kubelet/apis/podresources
// (NewV1PodResourcesServer), registered on a google.golang.org/grpc server
// built as pkg/kubelet/server ListenAndServePodResources builds it (its rate
// limiter, 100 requests/s with a burst of 10, answering ResourceExhausted past
// it; no message-size option, so grpc's 4 MiB default), listening through the
// kubelet's own k8s.io/cri-client CreateListener (a stale socket is unlinked,
// the new one is made under a temporary name and renamed into place). The
// feature gates are the release's defaults (see setFeatureGates). Only the
// providers, the kubelet's pod manager and container manager, are stood in
// for, by the pods file (pods.go), which is read again at every request.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/cri-client/pkg/util"
	"k8s.io/klog/v2"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	podresourcesv1alpha1 "k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
	kubefeatures "k8s.io/kubernetes/pkg/features"
	apisgrpc "k8s.io/kubernetes/pkg/kubelet/apis/grpc"
	"k8s.io/kubernetes/pkg/kubelet/apis/podresources"
)

// The Kubernetes minor whose feature-gate defaults the server runs with: that
// of the k8s.io/kubernetes module in go.mod.
const kubeletMinor = "1.37"

func usage() {
	fmt.Fprintf(os.Stderr, `usage: podresources --socket PATH --pods FILE

Serves the kubelet's PodResources API (v1 and v1alpha1) on the Unix socket
PATH with the kubelet's own server code, answering from FILE.

  --socket PATH  the socket to create (a stale one is removed first; the
                 kubelet's is /var/lib/kubelet/pod-resources/kubelet.sock)
  --pods FILE    JSON, read again at every request:
                 {"pods": [{"namespace": "ml", "name": "p", "uid": "u1",
                            "containers": [{"name": "c", "devices": [
                                {"resource": "nvidia.com/gpu", "ids": ["GPU-a"]}]}]}],
                  "allocatable": [{"resource": "nvidia.com/gpu", "ids": ["GPU-a", "GPU-b"]}]}
                 Every pod is reported running; CPUs, memory and dynamic
                 resources are empty. A bad file at start exits 1; at a
                 request it is answered with gRPC status Internal.

Prints "serving PodResources v1 on PATH" to stderr once listening; SIGTERM or
SIGINT removes the socket and exits 0.
`)
}

func main() {
	fs := flag.NewFlagSet("podresources", flag.ContinueOnError)
	fs.Usage = usage
	socket := fs.String("socket", "", "")
	podsPath := fs.String("pods", "", "")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if *socket == "" || *podsPath == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "podresources: --socket and --pods are required, and nothing else")
		usage()
		os.Exit(2)
	}
	if err := setFeatureGates(); err != nil {
		fmt.Fprintf(os.Stderr, "podresources: feature gates: %v\n", err)
		os.Exit(1)
	}
	// Checked once before listening so a broken test setup fails at once
	// rather than at the client's first call.
	if _, err := readPodsFile(*podsPath); err != nil {
		fmt.Fprintf(os.Stderr, "podresources: --pods %s: %v\n", *podsPath, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := serve(ctx, *socket, *podsPath, func() {
		fmt.Fprintf(os.Stderr, "serving PodResources v1 on %s\n", *socket)
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "podresources: %v\n", err)
		os.Exit(1)
	}
}

// setFeatureGates pins the gates to the defaults of the release, as a kubelet
// started without --feature-gates has them. The versioned gates already
// default to the compiled-in minor; setting it says so, and fails loudly if a
// go.mod bump and kubeletMinor ever disagree about which table applies. The
// ones the server reads: KubeletPodResourcesListUseActivePods (on: List
// returns active pods only), PodLevelResourceManagers (off in 1.37: no
// pod-level CPUs and memory).
func setFeatureGates() error {
	return utilfeature.DefaultMutableFeatureGate.SetEmulationVersion(version.MustParse(kubeletMinor))
}

// server holds what one request is answered from: load reads the file, puts
// the snapshot in prov and runs the real handler, one request at a time.
type server struct {
	podsPath string
	mu       sync.Mutex
	prov     providers
}

// load is a unary interceptor, inside the kubelet's rate limiter: a request
// the limiter refuses never reads the file, as a real kubelet's never reaches
// its managers. The file's error goes back to the client as Internal.
func (s *server) load(ctx context.Context, req any, info *grpc.UnaryServerInfo,
	handler grpc.UnaryHandler) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, err := readPodsFile(s.podsPath)
	if err != nil {
		klog.FromContext(ctx).Error(err, "podresources: cannot answer from the pods file",
			"method", info.FullMethod, "file", s.podsPath)
		return nil, status.Errorf(codes.Internal, "pods file %s: %v", s.podsPath, err)
	}
	s.prov.snap = snap
	return handler(ctx, req)
}

// serve listens on socket and answers until ctx ends, then removes the socket
// (the listener was made under another name and renamed, so closing it does
// not unlink the socket). ready runs once the socket accepts connections.
func serve(ctx context.Context, socket, podsPath string, ready func()) error {
	s := &server{podsPath: podsPath}
	all := podresources.PodResourcesProviders{
		Pods: &s.prov, Devices: &s.prov, Cpus: &s.prov, Memory: &s.prov, DynamicResources: &s.prov,
	}
	// As ListenAndServePodResources (pkg/kubelet/server/server.go): the
	// rate limiter is the server's UnaryInterceptor; grpc runs it before
	// the chained ones, so before load.
	gs := grpc.NewServer(
		apisgrpc.WithRateLimiter(ctx, "podresources", podresources.DefaultQPS, podresources.DefaultBurstTokens),
		grpc.ChainUnaryInterceptor(s.load))
	podresourcesv1alpha1.RegisterPodResourcesListerServer(gs, podresources.NewV1alpha1PodResourcesServer(all))
	podresourcesv1.RegisterPodResourcesListerServer(gs, podresources.NewV1PodResourcesServer(ctx, all))

	l, err := util.CreateListener("unix://" + socket)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", socket, err)
	}
	defer os.Remove(socket)
	klog.FromContext(ctx).Info("podresources: feature gates",
		"emulationVersion", utilfeature.DefaultMutableFeatureGate.EmulationVersion().String(),
		string(kubefeatures.KubeletPodResourcesListUseActivePods),
		utilfeature.DefaultFeatureGate.Enabled(kubefeatures.KubeletPodResourcesListUseActivePods),
		string(kubefeatures.PodLevelResourceManagers),
		utilfeature.DefaultFeatureGate.Enabled(kubefeatures.PodLevelResourceManagers))
	done := make(chan error, 1)
	go func() { done <- gs.Serve(l) }()
	ready()
	select {
	case err := <-done:
		return fmt.Errorf("serving on %s: %w", socket, err)
	case <-ctx.Done():
		gs.GracefulStop()
		<-done
		return nil
	}
}
