package store

// The s3 kind uses the AWS SDK for Go v2 (github.com/aws/aws-sdk-go-v2): it is
// the client AWS itself maintains, it speaks to any S3-compatible endpoint
// (BaseEndpoint, path-style addressing), and it brings the default credential
// chain AWS users expect (environment, shared config and profiles, web
// identity / IRSA, ECS and EC2 instance roles) without code of ours. Its own
// retries are off: this package retries, the same way for every kind.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

type s3Store struct {
	name   string
	bucket string
	prefix string // "" or ending in "/"
	opts   Options
	lim    *limiter
	client *s3.Client
}

func openS3(cfg Config, env Env, o Options) (*s3Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("an s3 store needs a bucket")
	}
	prefix, err := normPrefix(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	region := cfg.Region
	if region == "" && cfg.Endpoint != "" {
		region = "us-east-1" // what MinIO, Ceph, SeaweedFS and GCS accept
	}
	loads := []func(*config.LoadOptions) error{
		// The SDK's buildable client, so that AWS_CA_BUNDLE and the proxy
		// variables AWS users set are honoured; redirects are refused below.
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.DialContext = env.dial()
			tr.MaxIdleConns = o.MaxConcurrency * 2
			tr.MaxIdleConnsPerHost = o.MaxConcurrency
			tr.ResponseHeaderTimeout = o.Timeout
			tr.DisableCompression = true
		})),
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
		// Checksums only when an operation requires them: GCS, R2 and older
		// Ceph refuse the flexible-checksum headers that are the default since
		// 2025, and a GET is bounded and checked by its size here.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if region != "" {
		loads = append(loads, config.WithRegion(region))
	} else {
		loads = append(loads, config.WithDefaultRegion("us-east-1"))
	}
	switch {
	case cfg.AccessKeyEnv != "" && cfg.SecretKeyEnv != "":
		getenv := env.getenv()
		id, secret := getenv(cfg.AccessKeyEnv), getenv(cfg.SecretKeyEnv)
		if id == "" || secret == "" {
			missing := cfg.AccessKeyEnv
			if id != "" {
				missing = cfg.SecretKeyEnv
			}
			return nil, fmt.Errorf("environment variable %s is not set", missing)
		}
		loads = append(loads, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, "")))
	case cfg.AccessKeyEnv != "" || cfg.SecretKeyEnv != "":
		return nil, errors.New("access_key_env and secret_key_env go together: both, or neither for the default credential chain")
	}
	if cfg.Endpoint != "" {
		if err := checkEndpoint(cfg.Endpoint); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	awsCfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if bc, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient); ok {
		awsCfg.HTTPClient = &http.Client{Transport: bc.GetTransport(), CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect would carry the signature elsewhere
		}}
	}
	client := s3.NewFromConfig(awsCfg, func(so *s3.Options) {
		if cfg.Endpoint != "" {
			so.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		so.UsePathStyle = o.PathStyle
	})
	return &s3Store{name: cfg.Name, bucket: cfg.Bucket, prefix: prefix, opts: o, lim: newLimiter(o), client: client}, nil
}

func checkEndpoint(ep string) error {
	if !strings.HasPrefix(ep, "https://") && !strings.HasPrefix(ep, "http://") {
		return fmt.Errorf("endpoint %q: want an http:// or https:// URL", ep)
	}
	if strings.Contains(ep, "@") {
		return fmt.Errorf("endpoint %q: no user information in an endpoint (keys come from environment variables)", ep)
	}
	return nil
}

// key resolves a reference into the object's full key.
func (s *s3Store) key(ref string) (string, error) {
	if rest, ok := strings.CutPrefix(ref, "s3://"); ok {
		bucket, key, found := strings.Cut(rest, "/")
		if !found || bucket != s.bucket {
			return "", badRef("bucket %q is not the store's (%q)", bucket, s.bucket)
		}
		if e := checkKey(key, false); e != nil {
			return "", e
		}
		if !strings.HasPrefix(key, s.prefix) {
			return "", badRef("key %q is not under the store's prefix %q", clip(key), s.prefix)
		}
		return key, nil
	}
	if strings.Contains(ref, "://") {
		return "", badRef("an s3 store takes keys or s3://%s/… references, not %q", s.bucket, clip(ref))
	}
	if e := checkKey(ref, false); e != nil {
		return "", e
	}
	return joinPrefix(s.prefix, ref), nil
}

func (s *s3Store) Stat(ctx context.Context, ref string) (Info, error) {
	key, err := s.key(ref)
	if err != nil {
		return Info{}, err
	}
	var info Info
	err = s.lim.do(ctx, func(ctx context.Context) error {
		out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
		if err != nil {
			return s3Error(err)
		}
		info = Info{Size: aws.ToInt64(out.ContentLength), Version: s3Version(out.VersionId, out.ETag)}
		if out.ContentLength == nil {
			info.Size = -1
		}
		return nil
	})
	return info, err
}

func (s *s3Store) Fetch(ctx context.Context, ref string, maxBytes int64) ([]byte, Info, error) {
	key, err := s.key(ref)
	if err != nil {
		return nil, Info{}, err
	}
	limit := effectiveLimit(maxBytes, s.opts)
	var body []byte
	var info Info
	err = s.lim.do(ctx, func(ctx context.Context) error {
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key})
		if err != nil {
			return s3Error(err)
		}
		defer out.Body.Close()
		info = Info{Size: -1, Version: s3Version(out.VersionId, out.ETag)}
		if out.ContentLength != nil {
			info.Size = *out.ContentLength
		}
		// The size is known before the body: an object past the bound is
		// refused here, and closing the body drops the connection unread.
		body, err = readBounded(out.Body, info.Size, limit)
		return err
	})
	return body, info, err
}

// s3Version is the object's ETag (it changes with the bytes, and HEAD and
// GET agree on it everywhere), or its version id when it has no ETag.
func s3Version(versionID, etag *string) string {
	if e := strings.Trim(aws.ToString(etag), `"`); e != "" {
		return e
	}
	if v := aws.ToString(versionID); v != "null" {
		return v
	}
	return ""
}

// s3Error maps an S3 error to a reason: the object's own trouble (missing,
// forbidden, a bad key) is the row's; the store's (5xx, 429, throttling,
// credentials, a missing bucket, the network) is transient.
func s3Error(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	code := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	switch code {
	case "NoSuchKey", "NotFound", "NoSuchVersion":
		return &Error{Reason: ReasonNotFound, Err: err}
	case "AccessDenied", "Forbidden", "AllAccessDisabled":
		return &Error{Reason: ReasonForbidden, Err: err}
	case "NoSuchBucket", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
		"RequestTimeTooSkewed", "SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError", "ServiceUnavailable":
		return transient(err)
	case "KeyTooLongError", "InvalidArgument", "InvalidURI":
		return &Error{Reason: ReasonBadReference, Err: err}
	}
	switch {
	case status == http.StatusNotFound:
		return &Error{Reason: ReasonNotFound, Err: err}
	case status == http.StatusForbidden:
		return &Error{Reason: ReasonForbidden, Err: err}
	case status == http.StatusTooManyRequests || status >= 500 || status == http.StatusRequestTimeout:
		return transient(err)
	case status == http.StatusBadRequest:
		return &Error{Reason: ReasonBadReference, Err: err}
	}
	var ne net.Error
	if status == 0 || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		return transient(err) // no answer at all: the network, DNS, credentials
	}
	return transient(err)
}
