// Package storetest runs a real S3-compatible server for tests: SeaweedFS
// (Apache-2.0), built from source by scripts/build-seaweedfs.sh and started
// on 127.0.0.1 ports of its own, with a temporary directory, signed requests
// (one identity, keys in Weed), and nothing reported to the outside
// (telemetry off).
//
// The binary is $PGIMAGEAI_WEED, or the cache that scripts/build-seaweedfs.sh
// fills (${XDG_CACHE_HOME:-$HOME/.cache}/pgimageai/weed-<version>/weed).
// Without it a test fails; only under -short outside CI does it skip.
//
// Layer: test.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// WeedVersion is the module version of github.com/seaweedfs/seaweedfs that
// scripts/build-seaweedfs.sh builds.
const WeedVersion = "v0.0.0-20261109003541-7506e5f91cd6"

// EnvBinary names the variable that points at a weed binary.
const EnvBinary = "PGIMAGEAI_WEED"

// Weed is a running SeaweedFS with its S3 gateway.
type Weed struct {
	Endpoint  string // http://127.0.0.1:PORT, the S3 gateway
	AccessKey string // the identity's keys (test values, not secrets)
	SecretKey string
	Dir       string
	client    *s3.Client
	cmd       *exec.Cmd
	exited    chan struct{}
	log       string
}

// Binary returns the weed binary, failing tb when there is none (skipping
// under -short outside CI).
func Binary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			tb.Fatalf("storetest: %s=%s: %v", EnvBinary, p, err)
		}
		return p
	}
	p := CachedBinary()
	if _, err := os.Stat(p); err == nil {
		return p
	}
	msg := fmt.Sprintf("storetest: no SeaweedFS binary: set %s or run scripts/build-seaweedfs.sh (it builds %s)", EnvBinary, p)
	if testing.Short() && !ci() {
		tb.Skip(msg)
	}
	tb.Fatal(msg)
	return ""
}

// CachedBinary is where scripts/build-seaweedfs.sh puts the binary.
func CachedBinary() string {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "pgimageai", "weed-"+WeedVersion, "weed")
}

func ci() bool {
	switch os.Getenv("CI") {
	case "1", "true", "TRUE", "True":
		return true
	}
	return false
}

// StartWeed starts SeaweedFS (master, volume, filer and S3 gateway in one
// process) on free loopback ports, waits until its S3 gateway answers and
// the buckets exist, and stops it in tb.Cleanup.
func StartWeed(tb testing.TB, buckets ...string) *Weed {
	tb.Helper()
	bin := Binary(tb)
	dir := tb.TempDir()
	w := &Weed{AccessKey: "AKIDPGIMAGEAI", SecretKey: "pgimageai-test-secret", Dir: dir, exited: make(chan struct{})}
	identities := fmt.Sprintf(`{"identities":[{"name":"pgimageai","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}]}`, w.AccessKey, w.SecretKey)
	if err := os.WriteFile(filepath.Join(dir, "s3.json"), []byte(identities), 0o600); err != nil {
		tb.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		tb.Fatal(err)
	}
	ports, err := freePorts(8)
	if err != nil {
		tb.Fatal(err)
	}
	p := func(i int) string { return strconv.Itoa(ports[i]) }
	args := []string{"server",
		"-dir=" + data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port=" + p(0), "-master.port.grpc=" + p(1), "-master.telemetry=false", "-master.volumeSizeLimitMB=64",
		"-volume.port=" + p(2), "-volume.port.grpc=" + p(3), "-volume.max=8", "-volume.preStopSeconds=0",
		"-filer", "-filer.port=" + p(4), "-filer.port.grpc=" + p(5), "-filer.localSocket=" + filepath.Join(dir, "filer.sock"),
		"-s3", "-s3.port=" + p(6), "-s3.port.grpc=" + p(7), "-s3.port.iceberg=0", "-s3.port.lance=0",
		"-s3.config=" + filepath.Join(dir, "s3.json"),
	}
	w.log = filepath.Join(dir, "weed.log")
	logf, err := os.Create(w.log)
	if err != nil {
		tb.Fatal(err)
	}
	w.cmd = exec.Command(bin, args...)
	w.cmd.Dir = dir
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := w.cmd.Start(); err != nil {
		logf.Close()
		tb.Fatalf("storetest: starting %s: %v", bin, err)
	}
	go func() { w.cmd.Wait(); logf.Close(); close(w.exited) }()
	tb.Cleanup(w.stop)
	w.Endpoint = "http://127.0.0.1:" + p(6)
	w.client = s3.New(s3.Options{
		BaseEndpoint: aws.String(w.Endpoint), Region: "us-east-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(w.AccessKey, w.SecretKey, ""),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := w.waitReady(ctx); err != nil {
		tb.Fatalf("storetest: SeaweedFS did not get ready: %v\n%s", err, w.tail())
	}
	for _, b := range buckets {
		if err := w.retry(ctx, func(ctx context.Context) error {
			_, err := w.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)})
			return err
		}); err != nil {
			tb.Fatalf("storetest: creating bucket %s: %v\n%s", b, err, w.tail())
		}
	}
	return w
}

// waitReady waits until the S3 gateway answers HTTP (an AccessDenied for an
// unsigned request is an answer).
func (w *Weed) waitReady(ctx context.Context) error {
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-w.exited:
			return errors.New("weed exited")
		default:
		}
		if resp, err := c.Get(w.Endpoint + "/"); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// retry runs op until it works: the gateway answers before its volume
// server has registered, and the first writes may fail.
func (w *Weed) retry(ctx context.Context, op func(ctx context.Context) error) error {
	for {
		err := op(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-w.exited:
			return fmt.Errorf("weed exited: %w", err)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// Put writes an object and returns its ETag (unquoted).
func (w *Weed) Put(tb testing.TB, bucket, key string, body []byte) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var etag string
	err := w.retry(ctx, func(ctx context.Context) error {
		out, err := w.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
		if err == nil {
			etag = strings.Trim(aws.ToString(out.ETag), `"`)
		}
		return err
	})
	if err != nil {
		tb.Fatalf("storetest: put %s/%s: %v\n%s", bucket, key, err, w.tail())
	}
	return etag
}

// Delete removes an object.
func (w *Weed) Delete(tb testing.TB, bucket, key string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := w.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
		tb.Fatalf("storetest: delete %s/%s: %v", bucket, key, err)
	}
}

// Client is an S3 client of the identity, for what a test does beside the
// store under test.
func (w *Weed) Client() *s3.Client { return w.client }

// Stop ends the server (SIGTERM, then SIGKILL after 5 s); Cleanup calls it.
func (w *Weed) Stop() { w.stop() }

func (w *Weed) stop() {
	if w.cmd.Process == nil {
		return
	}
	select {
	case <-w.exited:
		return
	default:
	}
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-w.exited:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		<-w.exited
	}
}

func (w *Weed) tail() string {
	b, _ := os.ReadFile(w.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// freePorts returns n distinct free ports on 127.0.0.1 (every port of the
// server is given by a flag: none is derived).
func freePorts(n int) ([]int, error) {
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
