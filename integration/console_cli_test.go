package integration_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestCLIConsole runs `pgimageai console` as a user would: the token from
// the environment, never on the command line, in no log line; every page
// 401 without it; a clean stop on SIGTERM.
func TestCLIConsole(t *testing.T) {
	e := newCLIEnv(t)
	const token = "cli-console-token-8c1d0e5a"
	args := []string{"console", "--dsn", e.source.DSN(), "--target-dsn", e.target.DSN(), "--slot", e.slot}

	t.Run("no token is a usage error", func(t *testing.T) {
		out, errOut, code := cli(t, nil, append(args, "--addr", "127.0.0.1:0")...)
		if code != 2 || !strings.Contains(errOut, "PGIMAGEAI_CONSOLE_TOKEN") {
			t.Fatalf("exit %d, want 2 naming the variable:\n%s%s", code, out, errOut)
		}
	})
	t.Run("a short token is a usage error", func(t *testing.T) {
		_, errOut, code := cli(t, []string{"PGIMAGEAI_CONSOLE_TOKEN=short"}, append(args, "--addr", "127.0.0.1:0")...)
		if code != 2 || strings.Contains(errOut, "short") && !strings.Contains(errOut, "at least") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
	t.Run("no flag takes the token", func(t *testing.T) {
		_, _, code := cli(t, nil, append(args, "--console-token", token)...)
		if code != 2 {
			t.Fatalf("--console-token accepted (exit %d)", code)
		}
	})

	cmd := exec.Command(pgimageaiBinary(t), append(args, "--addr", "127.0.0.1:0", "--console-token-env", "MY_CONSOLE_TOKEN")...)
	cmd.Env = append(os.Environ(), "MY_CONSOLE_TOKEN="+token)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	var mu sync.Mutex
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		listening := regexp.MustCompile(`msg="console listening" addr=(\S+)`)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the console did not listen:\n%s", logs.String())
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Errorf("the console listens on %s", base)
	}
	for _, c := range []struct {
		path, want string
	}{{"/", "caption"}, {"/errors", "provider_error"}, {"/rules/caption", "caption"}} {
		if status, _ := httpGet(t, base+c.path, ""); status != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", c.path, status)
		}
		status, body := httpGet(t, base+c.path, token)
		if status != http.StatusOK || !strings.Contains(body, c.want) || strings.Contains(body, token) {
			t.Errorf("GET %s with the token: %d (want 200 with %q and without the token)", c.path, status, c.want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) || err != nil && !errors.Is(err, io.EOF) {
		t.Errorf("pgimageai console after SIGTERM: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, secret := range []string{token, "pgimageai-test"} {
		if strings.Contains(logs.String()+stdout.String(), secret) {
			t.Errorf("the console's output shows a secret:\n%s", logs.String())
		}
	}
}
