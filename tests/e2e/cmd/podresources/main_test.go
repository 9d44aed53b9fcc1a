// Tests of the podresources tool through the generated Go client of the API
// (k8s.io/kubelet/pkg/apis/podresources/v1), as any kubelet client talks to
// it: the answers of List, GetAllocatableResources and Get, the file being
// read again at every request, a bad file answered with Internal, the pods
// file's checks, and the binary's own start, refusal and shutdown (the test
// binary re-runs itself as the tool, see TestMain).
package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	kubefeatures "k8s.io/kubernetes/pkg/features"
)

const asToolEnv = "PODRESOURCES_TEST_RUN_MAIN"

// With asToolEnv set the test binary is the tool, so TestBinary runs the real
// main (flags, exit codes, signals) without a separate go build.
func TestMain(m *testing.M) {
	if os.Getenv(asToolEnv) == "1" {
		os.Args = append([]string{"podresources"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const firstFile = `{"pods": [
  {"namespace": "ml", "name": "p", "uid": "u1", "containers": [
    {"name": "c", "devices": [{"resource": "nvidia.com/gpu", "ids": ["GPU-fake-0000-0002", "GPU-fake-0000-0003"]}]},
    {"name": "side"}]},
  {"namespace": "web", "name": "w", "uid": "u2", "containers": [{"name": "app"}]}],
 "allocatable": [{"resource": "nvidia.com/gpu",
   "ids": ["GPU-fake-0000-0000", "GPU-fake-0000-0001", "GPU-fake-0000-0002", "GPU-fake-0000-0003"]}]}`

const secondFile = `{"pods": [
  {"namespace": "ml", "name": "p", "uid": "u1", "containers": [
    {"name": "c", "devices": [{"resource": "nvidia.com/gpu", "ids": ["GPU-fake-0000-0000"]}]},
    {"name": "side"}]},
  {"namespace": "ml", "name": "q", "uid": "u3", "containers": [
    {"name": "c", "devices": [{"resource": "nvidia.com/gpu", "ids": ["GPU-fake-0000-0001"]}]}]}],
 "allocatable": [{"resource": "nvidia.com/gpu", "ids": ["GPU-fake-0000-0000", "GPU-fake-0000-0001"]}]}`

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startServer runs serve on a fresh socket, over a stale regular file left
// there first (the kubelet's listener must unlink it), and returns a client.
func startServer(t *testing.T, podsText string) (podresourcesv1.PodResourcesListerClient, string, string) {
	t.Helper()
	if err := setFeatureGates(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	socket, pods := filepath.Join(dir, "kubelet.sock"), filepath.Join(dir, "pods.json")
	write(t, socket, "stale")
	write(t, pods, podsText)
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- serve(ctx, socket, pods, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve ended with %v", err)
		}
		if _, err := os.Stat(socket); !os.IsNotExist(err) {
			t.Errorf("the socket %s is still there after shutdown (%v)", socket, err)
		}
	})
	return podresourcesv1.NewPodResourcesListerClient(conn), pods, socket
}

// devices merges the kubelet's one-entry-per-device lists into resource ->
// sorted IDs, and checks that shape on the way.
func devices(t *testing.T, list []*podresourcesv1.ContainerDevices) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, d := range list {
		if len(d.DeviceIds) != 1 {
			t.Errorf("an entry with %d device ids, the kubelet sends one per entry: %v", len(d.DeviceIds), d)
		}
		out[d.ResourceName] = append(out[d.ResourceName], d.DeviceIds...)
	}
	for _, ids := range out {
		sort.Strings(ids)
	}
	return out
}

// listed flattens a List answer to "ns/name/container" -> devices.
func listed(t *testing.T, c podresourcesv1.PodResourcesListerClient) map[string]map[string][]string {
	t.Helper()
	resp, err := c.List(context.Background(), &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	out := map[string]map[string][]string{}
	for _, p := range resp.PodResources {
		if len(p.CpuIds) != 0 || len(p.Memory) != 0 {
			t.Errorf("pod %s/%s has pod-level CPUs or memory: %v", p.Namespace, p.Name, p)
		}
		for _, c := range p.Containers {
			if len(c.CpuIds) != 0 || len(c.Memory) != 0 || len(c.DynamicResources) != 0 {
				t.Errorf("container %s has CPUs, memory or dynamic resources: %v", c.Name, c)
			}
			out[p.Namespace+"/"+p.Name+"/"+c.Name] = devices(t, c.Devices)
		}
	}
	return out
}

func TestFeatureGatesAreTheReleaseDefaults(t *testing.T) {
	if err := setFeatureGates(); err != nil {
		t.Fatal(err)
	}
	gate := utilfeature.DefaultFeatureGate
	if !gate.Enabled(kubefeatures.KubeletPodResourcesListUseActivePods) {
		t.Error("KubeletPodResourcesListUseActivePods is off; a 1.37 kubelet has it on")
	}
	if gate.Enabled(kubefeatures.PodLevelResourceManagers) {
		t.Error("PodLevelResourceManagers is on; a 1.37 kubelet has it off")
	}
	if !gate.Enabled(kubefeatures.KubeletPodResourcesGet) {
		t.Error("KubeletPodResourcesGet is off; a 1.37 kubelet serves the API only with it on")
	}
}

func TestAnswersAndRereadsTheFile(t *testing.T) {
	c, pods, _ := startServer(t, firstFile)
	ctx := context.Background()
	gpu := "nvidia.com/gpu"

	want := map[string]map[string][]string{
		"ml/p/c":    {gpu: {"GPU-fake-0000-0002", "GPU-fake-0000-0003"}},
		"ml/p/side": {},
		"web/w/app": {},
	}
	if got := listed(t, c); !reflect.DeepEqual(got, want) {
		t.Errorf("List: got %v, want %v", got, want)
	}

	alloc, err := c.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil {
		t.Fatalf("GetAllocatableResources: %v", err)
	}
	wantAlloc := map[string][]string{gpu: {"GPU-fake-0000-0000", "GPU-fake-0000-0001", "GPU-fake-0000-0002", "GPU-fake-0000-0003"}}
	if got := devices(t, alloc.Devices); !reflect.DeepEqual(got, wantAlloc) {
		t.Errorf("GetAllocatableResources: got %v, want %v", got, wantAlloc)
	}
	if len(alloc.CpuIds) != 0 || len(alloc.Memory) != 0 {
		t.Errorf("allocatable CPUs or memory: %v", alloc)
	}

	one, err := c.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: "ml", PodName: "p"})
	if err != nil {
		t.Fatalf("Get ml/p: %v", err)
	}
	r := one.PodResources
	if r.Namespace != "ml" || r.Name != "p" || len(r.Containers) != 2 || r.Containers[0].Name != "c" {
		t.Errorf("Get ml/p: %v", r)
	} else if got := devices(t, r.Containers[0].Devices); !reflect.DeepEqual(got, want["ml/p/c"]) {
		t.Errorf("Get ml/p container c: got %v, want %v", got, want["ml/p/c"])
	}
	// The real server's not-found is a plain error: gRPC code Unknown.
	_, err = c.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: "ml", PodName: "nope"})
	if err == nil || !strings.Contains(err.Error(), "pod nope in namespace ml not found") {
		t.Errorf("Get of a pod not in the file: %v", err)
	}

	// The next request sees a rewritten file.
	write(t, pods, secondFile)
	want = map[string]map[string][]string{
		"ml/p/c":    {gpu: {"GPU-fake-0000-0000"}},
		"ml/p/side": {},
		"ml/q/c":    {gpu: {"GPU-fake-0000-0001"}},
	}
	if got := listed(t, c); !reflect.DeepEqual(got, want) {
		t.Errorf("List after the rewrite: got %v, want %v", got, want)
	}

	// A bad file is answered with Internal and its reason; a fixed one
	// serves again.
	write(t, pods, `{"pods": [{"namespace": "ml", "name": "p", "uid": "u1", "containers": [{"nme": "c"}]}]}`)
	_, err = c.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), `unknown field "nme"`) {
		t.Errorf("List with a bad file: %v, want Internal naming the unknown field", err)
	}
	write(t, pods, secondFile)
	if got := listed(t, c); !reflect.DeepEqual(got, want) {
		t.Errorf("List after fixing the file: got %v, want %v", got, want)
	}
}

func TestBadFilesAreRefused(t *testing.T) {
	ok := `{"namespace": "a", "name": "b", "uid": "u", "containers": [{"name": "c"}]}`
	for _, tc := range []struct{ text, reason string }{
		{`{"pods": [`, "not a pods file"},
		{`{"pods": []} {}`, "data after the JSON object"},
		{`{"pod": []}`, `unknown field "pod"`},
		{`{"pods": [{"namespace": "a", "name": "b", "containers": [{"name": "c"}]}]}`, "namespace, name and uid"},
		{`{"pods": [` + ok + `, ` + ok + `]}`, "pod a/b appears twice"},
		{`{"pods": [` + ok + `, {"namespace": "a", "name": "x", "uid": "u", "containers": [{"name": "c"}]}]}`, `uid "u" appears twice`},
		{`{"pods": [{"namespace": "a", "name": "b", "uid": "u"}]}`, "at least one container"},
		{`{"pods": [{"namespace": "a", "name": "b", "uid": "u", "containers": [{"name": "c"}, {"name": "c"}]}]}`, `container "c" appears twice`},
		{`{"pods": [{"namespace": "a", "name": "b", "uid": "u", "containers": [{"name": ""}]}]}`, "name must be set"},
		{`{"allocatable": [{"ids": ["x"]}]}`, "resource must be set"},
		{`{"allocatable": [{"resource": "r", "ids": [""]}]}`, "an empty device id"},
		{`{"allocatable": [{"resource": "r", "ids": ["x"]}, {"resource": "r", "ids": ["x"]}]}`, `device "x" appears twice`},
	} {
		path := filepath.Join(t.TempDir(), "pods.json")
		write(t, path, tc.text)
		if _, err := readPodsFile(path); err == nil || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: got %v, want an error saying %q", tc.text, err, tc.reason)
		}
	}
	if _, err := readPodsFile(filepath.Join(t.TempDir(), "absent.json")); err == nil {
		t.Error("a missing file was accepted")
	}
}

// TestBinary runs the tool's main: a bad file exits 1 with the reason; a
// good one prints the serving line, answers, and exits 0 on SIGTERM with the
// socket gone.
func TestBinary(t *testing.T) {
	dir := t.TempDir()
	socket, pods := filepath.Join(dir, "kubelet.sock"), filepath.Join(dir, "pods.json")
	tool := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "--socket", socket, "--pods", pods)
		cmd.Env = append(os.Environ(), asToolEnv+"=1")
		return cmd
	}

	write(t, pods, `{"pods": [{"name": "p"}]}`)
	out, err := tool().CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "namespace, name and uid must all be set") {
		t.Errorf("a bad file at start: exit %d, output %q; want exit 1 and the reason", code, out)
	}

	write(t, pods, firstFile)
	cmd := tool()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	for lines.Scan() && lines.Text() != "serving PodResources v1 on "+socket {
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := podresourcesv1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil || len(resp.PodResources) != 2 {
		t.Errorf("List from the binary: %v, %v", resp, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	for lines.Scan() { // to the end of its stderr, which Wait requires
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v, want exit 0", err)
	}
	if _, err := os.Stat(socket); !os.IsNotExist(err) {
		t.Errorf("the socket is still there after SIGTERM (%v)", err)
	}
}

func exitCode(err error) int {
	if e, ok := err.(*exec.ExitError); ok {
		return e.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
