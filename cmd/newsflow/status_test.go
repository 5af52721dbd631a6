package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// newsflow status works against a node that is no cluster member: it
// lists its stages, partitions and stores (and leave says there is no
// cluster to leave). Without the admin token it says that one is needed
// and how to give it.
func TestStatusSingleNode(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	status := func(env []string, args ...string) (string, string, error) {
		cmd := exec.Command(binPath, append([]string{"status", "--addr", "http://" + n.Addr}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	out, errOut, err := status(nil, "--token", testAdminToken)
	if err != nil {
		t.Fatalf("status: %v\n%s", err, errOut)
	}
	for _, want := range []string{"a single node (not a cluster member), ready", "STAGE", "trending.shares.repartition", "interest",
		"PARTITION", "STORE", "state", "dead letters: 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not say %q:\n%s", want, out)
		}
	}
	if _, _, err := status([]string{"NEWSFLOW_ADMIN_TOKEN=" + testAdminToken}); err != nil {
		t.Errorf("status with NEWSFLOW_ADMIN_TOKEN: %v", err)
	}
	if out, _, err := status(nil, "--token", testAdminToken, "--json"); err != nil || !strings.Contains(out, `"cluster":false`) {
		t.Errorf("status --json: %v\n%s", err, out)
	}
	out2, err := exec.Command(binPath, "leave", "--addr", "http://"+n.Addr, "--token", testAdminToken).CombinedOutput()
	if err == nil || !strings.Contains(string(out2), "not a cluster member") {
		t.Errorf("leave a single node: %v\n%s", err, out2)
	}
	_, errOut, err = status([]string{"NEWSFLOW_ADMIN_TOKEN="})
	if err == nil {
		t.Fatal("status without a token succeeded")
	}
	for _, want := range []string{"401", "--token", "NEWSFLOW_ADMIN_TOKEN", "auth.admin_token", "newsflow user add --admin"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("status without a token does not mention %q:\n%s", want, errOut)
		}
	}
}
