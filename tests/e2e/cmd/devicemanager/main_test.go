// Tests of the devicemanager tool against upstream's own stub device plugin
// (k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1 Stub), with
// PodResources asked through the kubelet's generated v1 client: registration,
// allocation through GetPreferredAllocation and Allocate, the run options,
// a refused admission, a health update, freeing by remove, a restart with the
// plugin registering again and the checkpoint keeping the allocations, the
// command protocol's refusals, and the binary's own start and stop (the test
// binary re-runs itself as the tool, see TestMain).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	plugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
)

const asToolEnv = "DEVICEMANAGER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asToolEnv) == "1" {
		os.Args = append([]string{"devicemanager"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const gpu = "nvidia.com/gpu"

// reply is an answer as a client reads it back from JSON.
type reply struct {
	OK          bool             `json:"ok"`
	Error       string           `json:"error"`
	Event       string           `json:"event"`
	Socket      string           `json:"socket"`
	Capacity    map[string]int64 `json:"capacity"`
	Allocatable map[string]int64 `json:"allocatable"`
	Healthy     []string         `json:"healthy"`
	Unhealthy   []string         `json:"unhealthy"`
	Registered  bool             `json:"registered"`
	Connected   bool             `json:"connected"`
	Containers  []struct {
		Name        string              `json:"name"`
		Init        bool                `json:"init"`
		Devices     []string            `json:"devices"`
		Resources   map[string][]string `json:"resources"`
		Envs        map[string]string   `json:"envs"`
		CDI         []string            `json:"cdi"`
		Annotations map[string]string   `json:"annotations"`
		DeviceSpecs []struct {
			ContainerPath string `json:"container_path"`
			HostPath      string `json:"host_path"`
			Permissions   string `json:"permissions"`
		} `json:"device_specs"`
	} `json:"containers"`
}

// do runs one command line in process and reads its answer back through
// JSON, as the Python test will.
func do(t *testing.T, h *harness, line string) reply {
	t.Helper()
	a, _ := h.command(context.Background(), []byte(line))
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatalf("%s: answer does not marshal: %v", line, err)
	}
	var r reply
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s: answer %s: %v", line, data, err)
	}
	if r.OK == (r.Error != "") {
		t.Errorf("%s: ok %v with error %q", line, r.OK, r.Error)
	}
	return r
}

func must(t *testing.T, h *harness, line string) reply {
	t.Helper()
	r := do(t, h, line)
	if !r.OK {
		t.Fatalf("%s: %s", line, r.Error)
	}
	return r
}

func devs(health map[string]string) []*pluginapi.Device {
	var out []*pluginapi.Device
	for _, id := range []string{"GPU-0", "GPU-1", "GPU-2", "GPU-3"} {
		h := pluginapi.Healthy
		if health[id] != "" {
			h = health[id]
		}
		out = append(out, &pluginapi.Device{ID: id, Health: h})
	}
	return out
}

// preferredCalls records the stub's GetPreferredAllocation requests; it
// prefers the highest ids, which a manager choosing on its own would pick
// only by chance.
type preferredCalls struct {
	mu    sync.Mutex
	calls []*pluginapi.ContainerPreferredAllocationRequest
}

func (p *preferredCalls) answer(r *pluginapi.PreferredAllocationRequest, _ map[string]*pluginapi.Device) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range r.ContainerRequests {
		p.calls = append(p.calls, c)
		ids := append([]string(nil), c.AvailableDeviceIDs...)
		sort.Sort(sort.Reverse(sort.StringSlice(ids)))
		if int(c.AllocationSize) < len(ids) {
			ids = ids[:c.AllocationSize]
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

func (p *preferredCalls) take() []*pluginapi.ContainerPreferredAllocationRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.calls
	p.calls = nil
	return c
}

// allocate answers as an NVIDIA-style plugin: env, CDI names, a device node
// and an annotation. The stub's default answer has no ContainerResponses,
// which the manager refuses ("no containers return in allocation response").
func allocate(r *pluginapi.AllocateRequest, _ map[string]*pluginapi.Device) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		ids := append([]string(nil), c.DevicesIds...)
		sort.Strings(ids)
		cr := &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(ids, ",")},
			Annotations: map[string]string{"troupe.io/stub": "yes"},
		}
		for _, id := range ids {
			cr.CdiDevices = append(cr.CdiDevices, &pluginapi.CDIDevice{Name: gpu + "=" + id})
			cr.Devices = append(cr.Devices, &pluginapi.DeviceSpec{
				ContainerPath: "/dev/" + id, HostPath: "/dev/" + id, Permissions: "rw"})
		}
		resp.ContainerResponses = append(resp.ContainerResponses, cr)
	}
	return resp, nil
}

func podJSON(uid, name string, gpus map[string]string) string {
	var cs []string
	for _, c := range []string{"c", "side"} {
		limits := ""
		if n := gpus[c]; n != "" {
			limits = fmt.Sprintf(`,"resources":{"limits":{"%s":"%s"},"requests":{"%s":"%s"}}`, gpu, n, gpu, n)
		}
		cs = append(cs, fmt.Sprintf(`{"name":"%s","image":"x"%s}`, c, limits))
	}
	return fmt.Sprintf(`{"op":"admit","pod":{"metadata":{"namespace":"ml","name":"%s","uid":"%s",`+
		`"creationTimestamp":"2026-01-02T03:04:05Z"},"spec":{"containers":[%s]}}}`, name, uid, strings.Join(cs, ","))
}

func prClient(t *testing.T, socket string) podresourcesv1.PodResourcesListerClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return podresourcesv1.NewPodResourcesListerClient(conn)
}

// merged flattens the kubelet's one-entry-per-device lists to resource ->
// sorted ids.
func merged(list []*podresourcesv1.ContainerDevices) map[string][]string {
	out := map[string][]string{}
	for _, d := range list {
		out[d.ResourceName] = append(out[d.ResourceName], d.DeviceIds...)
	}
	for _, ids := range out {
		sort.Strings(ids)
	}
	return out
}

// listed is List as "ns/name/container" -> devices (containers without any
// left out).
func listed(t *testing.T, c podresourcesv1.PodResourcesListerClient) map[string]map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatalf("PodResources List: %v", err)
	}
	out := map[string]map[string][]string{}
	for _, p := range resp.PodResources {
		for _, ct := range p.Containers {
			if d := merged(ct.Devices); len(d) > 0 {
				out[p.Namespace+"/"+p.Name+"/"+ct.Name] = d
			}
		}
	}
	return out
}

func allocatable(t *testing.T, c podresourcesv1.PodResourcesListerClient) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil {
		t.Fatalf("PodResources GetAllocatableResources: %v", err)
	}
	return merged(resp.Devices)[gpu]
}

func eq(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

func startHarness(t *testing.T) (*harness, string, string) {
	t.Helper()
	if err := setFeatureGates(); err != nil {
		t.Fatal(err)
	}
	// Short: a Unix socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "dm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	prSocket := filepath.Join(dir, "pr.sock")
	h, err := start(klog.NewContext(context.Background(), klog.Background()), filepath.Join(dir, "dp"), prSocket, gpu)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		h.shutdown()
		for _, s := range []string{prSocket, h.registrationSocket()} {
			if _, err := os.Stat(s); !os.IsNotExist(err) {
				t.Errorf("%s is still there after shutdown (%v)", s, err)
			}
		}
	})
	return h, filepath.Join(dir, "dp"), prSocket
}

func TestAgainstTheStubPlugin(t *testing.T) {
	h, dir, prSocket := startHarness(t)
	ctx := context.Background()
	logger := klog.Background()
	kubeletSock := filepath.Join(dir, "kubelet.sock")
	if h.registrationSocket() != kubeletSock {
		t.Fatalf("registration socket %s, want %s", h.registrationSocket(), kubeletSock)
	}
	pr := prClient(t, prSocket)

	r := must(t, h, `{"op":"capacity"}`)
	if r.Registered || r.Connected || len(r.Capacity) != 0 {
		t.Errorf("before any plugin: %+v", r)
	}

	// Registration: capacity appears.
	stub := plugin.NewDevicePluginStub(logger, devs(nil), filepath.Join(dir, "stub.sock"), gpu, false, true)
	pref := &preferredCalls{}
	stub.SetGetPreferredAllocFunc(pref.answer)
	stub.SetAllocFunc(allocate)
	if err := stub.Start(ctx); err != nil {
		t.Fatalf("stub Start: %v", err)
	}
	defer stub.Stop(logger)
	if err := stub.Register(ctx, kubeletSock, gpu, ""); err != nil {
		t.Fatalf("stub Register: %v", err)
	}
	r = must(t, h, `{"op":"wait","allocatable":4,"capacity":4,"timeout_s":30}`)
	all := []string{"GPU-0", "GPU-1", "GPU-2", "GPU-3"}
	if !r.Registered || !r.Connected {
		t.Errorf("after registration: registered %v connected %v", r.Registered, r.Connected)
	}
	eq(t, "healthy after registration", r.Healthy, all)
	eq(t, "unhealthy after registration", r.Unhealthy, []string{})
	eq(t, "PodResources allocatable", allocatable(t, pr), all)

	// Admission: the preferred allocation is taken, Allocate's answer is
	// the container's run options, PodResources lists the devices.
	r = must(t, h, podJSON("u1", "p1", map[string]string{"c": "2"}))
	if len(r.Containers) != 2 || r.Containers[0].Name != "c" || r.Containers[1].Name != "side" {
		t.Fatalf("admit p1 containers: %+v", r.Containers)
	}
	c := r.Containers[0]
	eq(t, "p1/c devices (the plugin's preferred)", c.Devices, []string{"GPU-2", "GPU-3"})
	eq(t, "p1/c envs", c.Envs, map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-2,GPU-3"})
	eq(t, "p1/c cdi", c.CDI, []string{gpu + "=GPU-2", gpu + "=GPU-3"})
	eq(t, "p1/c annotations", c.Annotations, map[string]string{"troupe.io/stub": "yes"})
	if len(c.DeviceSpecs) != 2 || c.DeviceSpecs[0].Permissions != "rw" {
		t.Errorf("p1/c device specs: %+v", c.DeviceSpecs)
	}
	eq(t, "p1/side devices", r.Containers[1].Devices, []string{})
	calls := pref.take()
	if len(calls) != 1 || calls[0].AllocationSize != 2 || len(calls[0].AvailableDeviceIDs) != 4 ||
		len(calls[0].MustIncludeDeviceIDs) != 0 {
		t.Errorf("GetPreferredAllocation calls: %v, want one of size 2 over the 4 devices", calls)
	}
	eq(t, "PodResources List after p1", listed(t, pr), map[string]map[string][]string{"ml/p1/c": {gpu: {"GPU-2", "GPU-3"}}})

	// More than is free: refused, and the pod is not active afterwards.
	r = do(t, h, podJSON("u2", "p2", map[string]string{"c": "3"}))
	if r.OK || !strings.Contains(r.Error, "requested number of devices unavailable") {
		t.Errorf("admit p2 asking for 3 of 2 free: %+v", r)
	}
	eq(t, "PodResources List after refusing p2", listed(t, pr), map[string]map[string][]string{"ml/p1/c": {gpu: {"GPU-2", "GPU-3"}}})
	if r = do(t, h, `{"op":"remove","uid":"u2"}`); r.OK {
		t.Error("remove of the refused p2 succeeded; it should not be admitted")
	}

	// A health update: allocatable drops, capacity does not.
	stub.Update(devs(map[string]string{"GPU-0": pluginapi.Unhealthy}))
	r = must(t, h, `{"op":"wait","allocatable":3,"capacity":4,"timeout_s":30}`)
	eq(t, "healthy after the update", r.Healthy, []string{"GPU-1", "GPU-2", "GPU-3"})
	eq(t, "unhealthy after the update", r.Unhealthy, []string{"GPU-0"})
	eq(t, "PodResources allocatable after the update", allocatable(t, pr), []string{"GPU-1", "GPU-2", "GPU-3"})

	// remove frees p1's devices: a pod asking for every healthy one gets
	// them, and never the unhealthy GPU-0.
	must(t, h, `{"op":"remove","uid":"u1"}`)
	eq(t, "PodResources List after removing p1", listed(t, pr), map[string]map[string][]string{})
	r = must(t, h, podJSON("u3", "p3", map[string]string{"c": "3"}))
	eq(t, "p3/c devices", r.Containers[0].Devices, []string{"GPU-1", "GPU-2", "GPU-3"})
	pref.take()

	// Restart: the plugin's socket is gone, the resource shows with 0 and
	// no live endpoint; the checkpoint keeps p3's devices.
	must(t, h, `{"op":"restart"}`)
	if _, err := os.Stat(filepath.Join(dir, "stub.sock")); !os.IsNotExist(err) {
		t.Errorf("the plugin's socket is still there after the restart (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kubelet_internal_checkpoint")); err != nil {
		t.Errorf("no checkpoint after the restart: %v", err)
	}
	r = must(t, h, `{"op":"capacity"}`)
	if !r.Registered || r.Connected || r.Capacity[gpu] != 0 || r.Allocatable[gpu] != 0 {
		t.Errorf("after the restart, before the plugin is back: %+v", r)
	}
	eq(t, "PodResources List after the restart (from the checkpoint)", listed(t, pr),
		map[string]map[string][]string{"ml/p3/c": {gpu: {"GPU-1", "GPU-2", "GPU-3"}}})
	eq(t, "PodResources allocatable after the restart", allocatable(t, pr), []string(nil))
	r = do(t, h, podJSON("u4", "p4", map[string]string{"c": "1"}))
	if r.OK || !strings.Contains(r.Error, "no healthy devices present") {
		t.Errorf("admit before the plugin is back: %+v", r)
	}

	// The plugin comes back as a real one does: serve again, register again.
	if err := stub.Restart(ctx); err != nil {
		t.Fatalf("stub Restart: %v", err)
	}
	if err := stub.Register(ctx, kubeletSock, gpu, ""); err != nil {
		t.Fatalf("stub Register after the restart: %v", err)
	}
	// The stub's ListAndWatch sends its initial list again: all healthy.
	r = must(t, h, `{"op":"wait","allocatable":4,"capacity":4,"connected":true,"timeout_s":30}`)
	eq(t, "PodResources allocatable after re-registering", allocatable(t, pr), all)
	// Only GPU-0 is free: the restored p3 still holds the others.
	r = must(t, h, podJSON("u4", "p4", map[string]string{"c": "1"}))
	eq(t, "p4/c devices after the restart", r.Containers[0].Devices, []string{"GPU-0"})
	// The plugin is asked even when the choice is forced (one free device,
	// one wanted): the manager has no shortcut for it.
	if calls := pref.take(); len(calls) != 1 || calls[0].AllocationSize != 1 ||
		!reflect.DeepEqual(calls[0].AvailableDeviceIDs, []string{"GPU-0"}) {
		t.Errorf("GetPreferredAllocation calls for p4: %v, want one of size 1 over GPU-0", calls)
	}
	eq(t, "PodResources List at the end", listed(t, pr), map[string]map[string][]string{
		"ml/p3/c": {gpu: {"GPU-1", "GPU-2", "GPU-3"}}, "ml/p4/c": {gpu: {"GPU-0"}}})

	// The plugin going away: allocatable 0, capacity kept (5 minutes'
	// grace), no live endpoint.
	stub.Stop(logger)
	r = must(t, h, `{"op":"wait","allocatable":0,"capacity":4,"connected":false,"timeout_s":30}`)
	eq(t, "unhealthy once the plugin is gone", r.Unhealthy, all)
	if !r.Registered {
		t.Error("registered went false at once; the kubelet keeps advertising for the grace period")
	}
}

func TestCommandsRefused(t *testing.T) {
	h, _, _ := startHarness(t)
	for _, tc := range []struct{ line, reason string }{
		{`{"op":"capacity"`, "not a command"},
		{`{"op":"capacity"} {}`, "data after the JSON object"},
		{`{"op":"capcity"}`, `unknown op "capcity"`},
		{`{}`, `no "op"`},
		{`{"op":"capacity","uid":"x"}`, `takes no "uid"`},
		{`{"op":"capacity","allocatble":1}`, `unknown field "allocatble"`},
		{`{"op":"wait"}`, "at least one of"},
		{`{"op":"wait","allocatable":3,"timeout_s":0.2}`, "timed out after 200ms waiting on nvidia.com/gpu: allocatable 0, want 3"},
		{`{"op":"remove","uid":"nope"}`, "no admitted pod has uid nope"},
		{`{"op":"remove"}`, `remove needs "uid"`},
		{`{"op":"admit","pod":{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]}}}`, "metadata.name and metadata.uid"},
		{`{"op":"admit","pod":{"metadata":{"name":"p","uid":"u"},"spec":{}}}`, "spec.containers is empty"},
		{`{"op":"admit","pod":{"metadata":{"name":"p","uid":"u"},"spec":{"containrs":[]}}}`, `unknown field "containrs"`},
	} {
		r := do(t, h, tc.line)
		if r.OK || !strings.Contains(r.Error, tc.reason) {
			t.Errorf("%s: got %+v, want an error saying %q", tc.line, r, tc.reason)
		}
	}
	// A pod asking for a resource no plugin registered is admitted with no
	// devices, as the device manager does (the kubelet's predicate check,
	// not run here, is what would refuse it).
	r := must(t, h, podJSON("u1", "p1", map[string]string{"c": "1"}))
	eq(t, "devices of an unregistered resource", r.Containers[0].Devices, []string{})
	for _, line := range []string{podJSON("u1", "other", nil), podJSON("u2", "p1", nil)} {
		if r := do(t, h, line); r.OK || !strings.Contains(r.Error, "already admitted") {
			t.Errorf("a second pod with the same uid or name: %+v", r)
		}
	}
	must(t, h, `{"op":"remove","uid":"u1"}`)
}

// TestBinary runs the tool's main: a bad command line exits 2; a good one
// prints the ready line, answers on stdout, and exits 0 after quit, at EOF
// and on SIGTERM, removing the PodResources socket each time.
func TestBinary(t *testing.T) {
	dir, err := os.MkdirTemp("", "dm")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dp, prSocket := filepath.Join(dir, "dp"), filepath.Join(dir, "pr.sock")
	tool := func(args ...string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), asToolEnv+"=1")
		return cmd
	}
	out, err := tool("--dir", dp).CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "--pod-resources-socket are required") {
		t.Errorf("without --pod-resources-socket: exit %d, output %q", code, out)
	}

	for _, how := range []string{"quit", "eof", "sigterm"} {
		cmd := tool("--dir", dp, "--pod-resources-socket", prSocket)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		next := func() reply {
			if !lines.Scan() {
				t.Fatalf("%s: stdout ended; stderr:\n%s", how, stderr.String())
			}
			var r reply
			if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
				t.Fatalf("%s: not a JSON line: %q", how, lines.Text())
			}
			return r
		}
		if r := next(); r.Event != "ready" || r.Socket != filepath.Join(dp, "kubelet.sock") {
			t.Errorf("%s: first line %+v, want the ready event naming %s", how, r, filepath.Join(dp, "kubelet.sock"))
		}
		for _, s := range []string{prSocket, filepath.Join(dp, "kubelet.sock")} {
			if st, err := os.Stat(s); err != nil || st.Mode()&os.ModeSocket == 0 {
				t.Errorf("%s: %s is not a socket once ready (%v)", how, s, err)
			}
		}
		io.WriteString(stdin, `{"op":"capacity"}`+"\n")
		if r := next(); !r.OK || r.Registered {
			t.Errorf("%s: capacity %+v", how, r)
		}
		switch how {
		case "quit":
			io.WriteString(stdin, `{"op":"quit"}`+"\n")
			if r := next(); !r.OK {
				t.Errorf("quit: %+v", r)
			}
		case "eof":
			stdin.Close()
		case "sigterm":
			cmd.Process.Signal(syscall.SIGTERM)
		}
		if lines.Scan() {
			t.Errorf("%s: more output after the end: %q", how, lines.Text())
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("%s: %v, want exit 0; stderr:\n%s", how, err, stderr.String())
		}
		if _, err := os.Stat(prSocket); !os.IsNotExist(err) {
			t.Errorf("%s: the PodResources socket is still there (%v)", how, err)
		}
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
