package bench

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// newS3Client builds a client tuned to measure the server, not the client:
//
//   - path-style URLs and static credentials; no shared config or
//     environment is read, so a run depends only on its flags;
//   - no retries and no client-side rate limiting: a failed request is
//     counted, not hidden behind a second attempt;
//   - no request checksums and no response checksum validation beyond what
//     the API requires (GET bodies are verified byte for byte instead);
//   - UNSIGNED-PAYLOAD unless signPayload (see Options.SignPayload);
//   - no "Expect: 100-continue" for large PUTs, which would add a round
//     trip per request;
//   - an idle connection pool as large as the client count, so connections
//     are reused instead of re-dialled under load.
func newS3Client(ep Endpoint, conns int, signPayload bool) *s3.Client {
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = 2 * conns
		t.MaxIdleConnsPerHost = 2 * conns
		t.IdleConnTimeout = 90 * time.Second
		t.DisableCompression = true
	})
	region := ep.Region
	if region == "" {
		region = DefaultRegion
	}
	cfg := aws.Config{
		Region:                     region,
		Credentials:                credentials.NewStaticCredentialsProvider(ep.Access, ep.Secret, ""),
		HTTPClient:                 httpClient,
		Retryer:                    func() aws.Retryer { return aws.NopRetryer{} },
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(ep.URL)
		o.UsePathStyle = true
		o.ContinueHeaderThresholdBytes = -1
		o.DisableLogOutputChecksumValidationSkipped = true
		if !signPayload {
			o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
		}
	})
}

// NewS3Client is the client the load generator uses, for experiments that
// drive S3 load of their own (terrace bench scaleout): same settings as
// newS3Client, unsigned payloads.
func NewS3Client(ep Endpoint, conns int) *s3.Client { return newS3Client(ep, conns, false) }

// errorCode returns the S3 error code of err ("NoSuchKey"), or "".
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// shortError renders err for a report: the S3 code and message when there
// is one, else the error text, at most 200 bytes.
func shortError(err error) string {
	var s string
	var ae smithy.APIError
	if errors.As(err, &ae) {
		s = ae.ErrorCode()
		if m := ae.ErrorMessage(); m != "" {
			s += ": " + m
		}
	} else {
		s = err.Error()
	}
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
