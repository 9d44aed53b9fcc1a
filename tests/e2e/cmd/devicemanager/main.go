// devicemanager runs the kubelet's own device manager of the pinned release
// and the kubelet's own PodResources v1 server answering from it, so that a
// device plugin (troupe-node, device plugin API v1beta1) is tested against
// the code a real kubelet runs rather than against a reimplementation. Test
// tooling only.
//
//	devicemanager --dir DIR --pod-resources-socket PATH [--resource NAME] [--v N]
//
// What runs is the release's:
//   - the device manager, ManagerImpl of k8s.io/kubernetes/pkg/kubelet/cm/
//     devicemanager: its registration server on DIR/kubelet.sock (the kubelet's
//     is /var/lib/kubelet/device-plugins/kubelet.sock; the unexported
//     newManagerImpl that takes the path is reached with go:linkname, see
//     manager.go), its ListAndWatch clients, its allocation (Allocate,
//     GetPreferredAllocation when the plugin's options ask for it,
//     PreStartContainer when they ask for that), its checkpoint file
//     DIR/kubelet_internal_checkpoint and its GetCapacity;
//   - the admission that calls it: the topology manager
//     (pkg/kubelet/cm/topologymanager) with the kubelet's default policy
//     "none", the device manager as its only hint provider, whose Admit calls
//     Allocate for each init container and then each app container;
//   - the PodResources v1 handlers (pkg/kubelet/apis/podresources,
//     NewV1PodResourcesServer) on a grpc server built as the kubelet builds it
//     (its rate limiter; k8s.io/cri-client CreateListener), the feature gates
//     at the release's defaults.
//
// Stood in for: the kubelet's pod manager (the pods admitted through this
// tool's stdin, all reported Running), the node status loop (the "capacity"
// and "wait" commands call GetCapacity as the kubelet's node status update
// does every 10 s), the container runtime (nothing starts; "admit" calls
// GetDeviceRunContainerOptions as the runtime manager does before it creates
// each container and reports what it returned), the CPU, memory and DRA
// managers (empty, as with the "none" policies and no claims). The
// PredicateAdmitHandler (node allocatable versus requests) is not run: a pod
// asking for a resource no plugin ever registered is admitted with no devices,
// as the device manager itself does (it skips resources it does not know).
//
// # Protocol
//
// Commands are JSON objects, one per line, on stdin; each gets exactly one
// JSON line on stdout, in order. Every answer has "ok" (true or false) and,
// when false, "error". Logs (klog) go to stderr. Unknown fields in a command
// are refused (ok:false). Before any command, once both sockets listen, the
// tool prints
//
//	{"event":"ready","socket":"DIR/kubelet.sock","pod_resources_socket":"PATH"}
//
// A "resource" field in capacity and wait defaults to --resource.
//
//	{"op":"capacity"[,"resource":R]}
//	  -> {"ok":true,"capacity":{"nvidia.com/gpu":8},"allocatable":{"nvidia.com/gpu":7},
//	      "healthy":["GPU-a",...],"unhealthy":["GPU-h"],"registered":true,"connected":true,
//	      "deleted":[]}
//	  capacity/allocatable: GetCapacity's two lists, every resource. healthy:
//	  R's ids in GetAllocatableDevices; unhealthy: R's ids the manager holds as
//	  unhealthy (a health update, or every device once the plugin's
//	  ListAndWatch ended); both sorted. registered: R is in capacity (the
//	  kubelet still advertises it, which it does for 5 minutes after its
//	  plugin went away, and with 0 after a restart until the plugin comes
//	  back). connected: a live plugin endpoint serves R (registered and its
//	  ListAndWatch not ended). deleted: GetCapacity's third answer, resources
//	  dropped at this call.
//
//	{"op":"wait"[,"resource":R][,"allocatable":N][,"capacity":M][,"connected":B][,"timeout_s":S]}
//	  Polls capacity every 50 ms until each given condition holds (at least
//	  one must be given; timeout_s defaults to 10), then answers as capacity
//	  does. On timeout: ok:false, the error says which condition failed, and
//	  the rest of the answer is the last capacity answer.
//
//	{"op":"admit","pod":POD}
//	  POD is a v1.Pod in JSON (metadata.namespace (default "default"), name
//	  and uid required; spec.initContainers and spec.containers with
//	  resources.limits, e.g. {"nvidia.com/gpu":"2"}). The pod is added to the
//	  active pods, the topology manager admits it (Allocate per container,
//	  init containers first), then GetDeviceRunContainerOptions is called per
//	  container in the same order.
//	  -> {"ok":true,"containers":[{"name":"c","init":false,"devices":["GPU-a","GPU-b"],
//	      "resources":{"nvidia.com/gpu":["GPU-a","GPU-b"]},"envs":{"K":"V"},
//	      "cdi":["nvidia.com/gpu=GPU-a"],"annotations":{"k":"v"},
//	      "mounts":[{"container_path":"/x","host_path":"/y","read_only":true}],
//	      "device_specs":[{"container_path":"/dev/nvidia0","host_path":"/dev/nvidia0","permissions":"rw"}]}]}
//	  devices: the --resource ids of GetDevices(uid, container), sorted;
//	  resources: every resource's. On a refused admission or a failing
//	  GetDeviceRunContainerOptions: ok:false, error, and the pod is removed
//	  from the active pods again (its devices are freed at the manager's next
//	  UpdateAllocatedDevices, which this tool calls at once). A uid or
//	  namespace/name already admitted is refused.
//
//	{"op":"remove","uid":U}
//	  -> {"ok":true} once the pod is out of the active pods and
//	  UpdateAllocatedDevices has freed its devices; an unknown uid is ok:false.
//
//	{"op":"restart"}
//	  As a kubelet restart: the manager is stopped (its plugin connections
//	  closed, DIR/kubelet.sock gone), every socket in DIR is removed, a new
//	  manager is made on DIR and started (it reads DIR/kubelet_internal_checkpoint:
//	  the admitted pods' devices come back; the checkpointed resources show
//	  with capacity 0 until their plugins register again). -> {"ok":true}
//	  once the new DIR/kubelet.sock listens. The admitted pods stay; the
//	  PodResources server answers from the new manager.
//
//	{"op":"quit"}
//	  -> {"ok":true}, then everything stops, the PodResources socket is
//	  removed and the tool exits 0. EOF on stdin and SIGTERM/SIGINT do the
//	  same without an answer.
//
// Exit status: 0 after quit, EOF or a signal; 1 when the manager or a socket
// cannot be set up; 2 for a bad command line.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"k8s.io/apimachinery/pkg/util/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
)

// The Kubernetes minor whose feature-gate defaults the tool runs with: that
// of the k8s.io/kubernetes module in go.mod.
const kubeletMinor = "1.37"

func usage() {
	fmt.Fprintf(os.Stderr, `usage: devicemanager --dir DIR --pod-resources-socket PATH [--resource NAME] [--v N]

Runs the kubelet's device manager (registration socket DIR/kubelet.sock,
checkpoint DIR/kubelet_internal_checkpoint) and the kubelet's PodResources v1
server on PATH answering from it, and reads JSON commands on stdin, one per
line, answering one JSON line each on stdout (the protocol is described at the
top of tests/e2e/cmd/devicemanager/main.go): capacity, wait, admit, remove,
restart, quit.

  --dir DIR                    the device plugin directory (made if missing;
                               the kubelet's is /var/lib/kubelet/device-plugins)
  --pod-resources-socket PATH  the PodResources socket (a stale one is removed
                               first; the kubelet's is
                               /var/lib/kubelet/pod-resources/kubelet.sock)
  --resource NAME              the resource capacity/wait/admit report ids of
                               (default nvidia.com/gpu)
  --v N                        klog verbosity on stderr (default 0; 4 shows
                               each Allocate and GetPreferredAllocation call)

Prints {"event":"ready",...} on stdout once both sockets listen; quit, EOF on
stdin, SIGTERM or SIGINT stop everything and exit 0.
`)
}

func main() {
	fs := flag.NewFlagSet("devicemanager", flag.ContinueOnError)
	fs.Usage = usage
	dir := fs.String("dir", "", "")
	prSocket := fs.String("pod-resources-socket", "", "")
	resource := fs.String("resource", "nvidia.com/gpu", "")
	verbosity := fs.Int("v", 0, "")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if *dir == "" || *prSocket == "" || *resource == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "devicemanager: --dir and --pod-resources-socket are required, and nothing else")
		usage()
		os.Exit(2)
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	if err := klogFlags.Set("v", strconv.Itoa(*verbosity)); err != nil {
		fmt.Fprintf(os.Stderr, "devicemanager: --v %d: %v\n", *verbosity, err)
		os.Exit(2)
	}
	if err := setFeatureGates(); err != nil {
		fmt.Fprintf(os.Stderr, "devicemanager: feature gates: %v\n", err)
		os.Exit(1)
	}
	absDir, err := filepath.Abs(*dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "devicemanager: --dir %s: %v\n", *dir, err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	out := json.NewEncoder(os.Stdout) // one Write per Encode: nothing to flush
	h, err := start(klog.NewContext(ctx, klog.Background()), absDir, *prSocket, *resource)
	if err != nil {
		fmt.Fprintf(os.Stderr, "devicemanager: %v\n", err)
		os.Exit(1)
	}
	out.Encode(map[string]any{"event": "ready", "socket": h.registrationSocket(),
		"pod_resources_socket": *prSocket})

	lines := make(chan []byte)
	go func() {
		in := bufio.NewScanner(os.Stdin)
		in.Buffer(make([]byte, 64*1024), 16*1024*1024)
		for in.Scan() {
			lines <- append([]byte(nil), in.Bytes()...)
		}
		if err := in.Err(); err != nil {
			klog.Background().Error(err, "devicemanager: reading stdin")
		}
		close(lines)
	}()
	code := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case line, more := <-lines:
			if !more {
				break loop
			}
			if len(line) == 0 {
				continue
			}
			answer, quit := h.command(ctx, line)
			if err := out.Encode(answer); err != nil {
				klog.Background().Error(err, "devicemanager: writing an answer to stdout")
				code = 1
				break loop
			}
			if quit {
				break loop
			}
		}
	}
	h.shutdown()
	os.Exit(code)
}

// setFeatureGates pins the gates to the defaults of the release, as a kubelet
// started without --feature-gates has them (see the podresources tool). The
// device manager reads ResourceHealthStatus (beta, on: health changes of
// allocated devices are sent on its Updates channel, which this tool drains)
// and DRAExtendedResource.
func setFeatureGates() error {
	return utilfeature.DefaultMutableFeatureGate.SetEmulationVersion(version.MustParse(kubeletMinor))
}
