// kubesim plays the parts of a cluster that troupe's end-to-end rig has no
// real program for: it creates simulated GPU nodes, and it stands in for the
// kubelet wherever scheduling depends on one. Test tooling only.
//
//	kubesim nodes   --kubeconfig K --count N --topo-dir DIR [--first I]
//	kubesim kubelet --kubeconfig K
//	kubesim bench   --kubeconfig K ... (see bench.go)
//
// The kubelet part, for every pod bound to a node this program created:
//   - a bound Pending pod is marked Running (phase, PodReady and
//     ContainersReady conditions, container statuses, a pod IP);
//   - a pod with the annotation rig.troupe.io/run-seconds: "S" is marked
//     Succeeded S seconds after it started, as a job that ends;
//   - a terminating pod (deletionTimestamp set) is deleted with grace period
//     0, as a kubelet does once the containers have stopped, so deletes and
//     preemption complete instead of leaving the pod Terminating for ever.
//
// Nodes stay Ready because the rig runs kube-controller-manager without its
// node-lifecycle controller, so nothing reads the (absent) node leases.
package main

import (
	"fmt"
	"os"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage: kubesim COMMAND [flags]

commands:
  nodes     create simulated GPU nodes (capacity, GFD labels, topology
            annotations, network-domain labels, some tainted, cordoned or
            with unhealthy GPUs)
  kubelet   play the kubelet's part for pods bound to simulated nodes
  bench     the end-to-end scheduling benchmark workload (see bench/e2e)

Run "kubesim COMMAND -h" for the flags of each.
`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "nodes":
		err = runNodes(os.Args[2:])
	case "kubelet":
		err = runKubelet(os.Args[2:])
	case "bench":
		err = runBench(os.Args[2:])
	case "-h", "--help", "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "kubesim: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubesim %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
