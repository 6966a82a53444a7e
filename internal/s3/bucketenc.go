package s3

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"net/http"

	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/metrics"
	"github.com/versity/versitygw/s3api/controllers"
	"github.com/versity/versitygw/s3err"
)

// attrEncryption is the bucket attribute holding the default encryption
// (bucketEncryptionConfig as JSON).
const attrEncryption = "s3.encryption"

type bucketEncryptionConfig struct {
	Algorithm        string `json:"alg"`
	BucketKeyEnabled bool   `json:"bke,omitempty"`
}

// The PutBucketEncryption / GetBucketEncryption document.
type sseConfigXML struct {
	XMLName xml.Name `xml:"ServerSideEncryptionConfiguration"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	Rules   []struct {
		Default *struct {
			SSEAlgorithm   string `xml:"SSEAlgorithm"`
			KMSMasterKeyID string `xml:"KMSMasterKeyID,omitempty"`
		} `xml:"ApplyServerSideEncryptionByDefault"`
		BucketKeyEnabled *bool `xml:"BucketKeyEnabled"`
	} `xml:"Rule"`
}

var errNoBucketEncryption = s3err.APIError{
	Code:           "ServerSideEncryptionConfigurationNotFoundError",
	Description:    "The server side encryption configuration was not found",
	HTTPStatusCode: http.StatusNotFound,
}

// bucketEncryption returns a bucket's default SSE algorithm ("" if none).
func (b *Backend) bucketEncryption(ctx context.Context, bucket string) (string, error) {
	raw, err := b.getAttr(ctx, "GetBucketEncryption", bucket, attrEncryption, nil)
	if err != nil || len(raw) == 0 {
		return "", err
	}
	var c bucketEncryptionConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", b.mapErr("GetBucketEncryption", err, bucket)
	}
	return c.Algorithm, nil
}

// parseBucketEncryption validates a PutBucketEncryption body: one rule,
// AES256 (aws:kms needs a KMS Terrace does not have).
func parseBucketEncryption(body []byte) (bucketEncryptionConfig, error) {
	var doc sseConfigXML
	if err := xml.Unmarshal(body, &doc); err != nil || len(doc.Rules) != 1 || doc.Rules[0].Default == nil {
		return bucketEncryptionConfig{}, errMalformedXML
	}
	r := doc.Rules[0]
	switch r.Default.SSEAlgorithm {
	case "AES256":
		if r.Default.KMSMasterKeyID != "" {
			return bucketEncryptionConfig{}, errSSEMethod
		}
	case "aws:kms", "aws:kms:dsse":
		return bucketEncryptionConfig{}, errSSEKMSUnsupported
	default:
		return bucketEncryptionConfig{}, errMalformedXML
	}
	c := bucketEncryptionConfig{Algorithm: "AES256"}
	if r.BucketKeyEnabled != nil {
		c.BucketKeyEnabled = *r.BucketKeyEnabled
	}
	return c, nil
}

func (b *Backend) bucketEncryptionRoutes(e routeEnv) []bucketRoute {
	return []bucketRoute{
		{method: http.MethodPut, query: "encryption", metric: metrics.ActionPutBucketEncryption,
			action: auth.PutEncryptionConfigurationAction, perm: auth.PermissionWrite,
			ctrl: func(ctx fiber.Ctx, bucket string) (*controllers.Response, error) {
				c, err := parseBucketEncryption(ctx.Body())
				if err != nil {
					return nil, err
				}
				if b.opts.Keys == nil {
					return nil, errSSENoMasterKey
				}
				raw, _ := json.Marshal(c)
				return nil, b.putAttr(ctx.RequestCtx(), "PutBucketEncryption", bucket, attrEncryption, raw)
			}},
		{method: http.MethodGet, query: "encryption", metric: metrics.ActionGetBucketEncryption,
			action: auth.GetEncryptionConfigurationAction, perm: auth.PermissionRead,
			ctrl: func(ctx fiber.Ctx, bucket string) (*controllers.Response, error) {
				raw, err := b.getAttr(ctx.RequestCtx(), "GetBucketEncryption", bucket, attrEncryption, errNoBucketEncryption)
				if err != nil {
					return nil, err
				}
				var c bucketEncryptionConfig
				if err := json.Unmarshal(raw, &c); err != nil {
					return nil, b.mapErr("GetBucketEncryption", err, bucket)
				}
				return &controllers.Response{Data: encryptionXML(c)}, nil
			}},
		{method: http.MethodDelete, query: "encryption", metric: metrics.ActionDeleteBucketEncryption,
			action: auth.PutEncryptionConfigurationAction, perm: auth.PermissionWrite,
			ctrl: func(ctx fiber.Ctx, bucket string) (*controllers.Response, error) {
				err := b.putAttr(ctx.RequestCtx(), "DeleteBucketEncryption", bucket, attrEncryption, nil)
				return &controllers.Response{MetaOpts: &controllers.MetaOptions{Status: http.StatusNoContent}}, err
			}},
	}
}

// encryptionXML is the GetBucketEncryption answer.
func encryptionXML(c bucketEncryptionConfig) any {
	type def struct {
		SSEAlgorithm string `xml:"SSEAlgorithm"`
	}
	type rule struct {
		ApplyServerSideEncryptionByDefault def
		BucketKeyEnabled                   bool
	}
	return struct {
		XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ServerSideEncryptionConfiguration"`
		Rule    rule
	}{Rule: rule{ApplyServerSideEncryptionByDefault: def{SSEAlgorithm: c.Algorithm}, BucketKeyEnabled: c.BucketKeyEnabled}}
}
