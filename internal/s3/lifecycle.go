package s3

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/metrics"
	"github.com/versity/versitygw/s3api/controllers"
	"github.com/versity/versitygw/s3err"

	"github.com/terrace-storage/terrace/internal/lifecycle"
)

// Bucket lifecycle configuration (versitygw answers it NotImplemented).
// The XML is parsed into lifecycle.Config, validated against the class
// table and stored as the bucket attribute the lifecycle runner reads.

type lifecycleTagXML struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type lifecycleWhenXML struct {
	Days                      *int    `xml:"Days"`
	Date                      *string `xml:"Date"`
	StorageClass              string  `xml:"StorageClass"`
	ExpiredObjectDeleteMarker *bool   `xml:"ExpiredObjectDeleteMarker"`
}

type lifecycleXML struct {
	XMLName xml.Name `xml:"LifecycleConfiguration"`
	Rules   []struct {
		ID     string  `xml:"ID"`
		Status string  `xml:"Status"`
		Prefix *string `xml:"Prefix"`
		Filter *struct {
			Prefix *string          `xml:"Prefix"`
			Tag    *lifecycleTagXML `xml:"Tag"`
			GT     *int64           `xml:"ObjectSizeGreaterThan"`
			LT     *int64           `xml:"ObjectSizeLessThan"`
			And    *struct {
				Prefix *string           `xml:"Prefix"`
				Tags   []lifecycleTagXML `xml:"Tag"`
				GT     *int64            `xml:"ObjectSizeGreaterThan"`
				LT     *int64            `xml:"ObjectSizeLessThan"`
			} `xml:"And"`
		} `xml:"Filter"`
		Expiration  *lifecycleWhenXML  `xml:"Expiration"`
		Transitions []lifecycleWhenXML `xml:"Transition"`
		Abort       *struct {
			Days int `xml:"DaysAfterInitiation"`
		} `xml:"AbortIncompleteMultipartUpload"`
		Noncurrent *struct {
			Days int `xml:"NoncurrentDays"`
		} `xml:"NoncurrentVersionExpiration"`
		NoncurrentTransitions []struct{} `xml:"NoncurrentVersionTransition"`
	} `xml:"Rule"`
}

var (
	errNoLifecycle = s3err.APIError{Code: "NoSuchLifecycleConfiguration", Description: "The lifecycle configuration does not exist",
		HTTPStatusCode: http.StatusNotFound}
	errLifecycleNoncurrentTransition = s3err.APIError{Code: "NotImplemented",
		Description:    "NoncurrentVersionTransition is not supported: noncurrent versions stay on the tier they were written to (NoncurrentVersionExpiration is supported).",
		HTTPStatusCode: http.StatusNotImplemented}
)

func invalidLifecycle(msg string) error {
	return s3err.APIError{Code: "InvalidArgument", Description: msg, HTTPStatusCode: http.StatusBadRequest}
}

// parseLifecycleDate accepts ISO 8601 dates as clients send them.
func parseLifecycleDate(s string) (time.Time, error) {
	for _, f := range []string{time.RFC3339Nano, time.RFC3339, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(f, strings.TrimSpace(s)); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, invalidLifecycle("'Date' must be in ISO 8601 format")
}

// parseLifecycle turns a PutBucketLifecycleConfiguration body into a
// validated configuration.
func (b *Backend) parseLifecycle(body []byte) (lifecycle.Config, error) {
	var doc lifecycleXML
	if err := xml.Unmarshal(body, &doc); err != nil {
		return lifecycle.Config{}, errMalformedXML
	}
	var cfg lifecycle.Config
	for _, x := range doc.Rules {
		r := lifecycle.Rule{ID: x.ID}
		switch x.Status {
		case "Enabled":
			r.Enabled = true
		case "Disabled":
		default:
			return lifecycle.Config{}, errMalformedXML
		}
		if x.Prefix != nil && x.Filter != nil {
			return lifecycle.Config{}, errMalformedXML
		}
		if x.Prefix != nil {
			r.Prefix = *x.Prefix
		}
		if f := x.Filter; f != nil {
			n := 0
			for _, set := range []bool{f.Prefix != nil, f.Tag != nil, f.And != nil, f.GT != nil || f.LT != nil} {
				if set {
					n++
				}
			}
			if n > 1 {
				return lifecycle.Config{}, errMalformedXML
			}
			if f.Prefix != nil {
				r.Prefix = *f.Prefix
			}
			if f.Tag != nil {
				r.Tags = map[string]string{f.Tag.Key: f.Tag.Value}
			}
			gt, lt := f.GT, f.LT
			if a := f.And; a != nil {
				if a.Prefix != nil {
					r.Prefix = *a.Prefix
				}
				for _, t := range a.Tags {
					if r.Tags == nil {
						r.Tags = map[string]string{}
					}
					if _, dup := r.Tags[t.Key]; dup {
						return lifecycle.Config{}, invalidLifecycle("Duplicate Tag Keys are not allowed.")
					}
					r.Tags[t.Key] = t.Value
				}
				gt, lt = a.GT, a.LT
			}
			if gt != nil {
				r.MinSize = *gt
			}
			if lt != nil {
				r.MaxSize = *lt
			}
		}
		if e := x.Expiration; e != nil {
			r.Expiration = &lifecycle.Expiration{}
			if e.Days != nil {
				if *e.Days <= 0 {
					return lifecycle.Config{}, invalidLifecycle("'Days' for Expiration action must be a positive integer")
				}
				r.Expiration.Days = *e.Days
			}
			if e.Date != nil {
				d, err := parseLifecycleDate(*e.Date)
				if err != nil {
					return lifecycle.Config{}, err
				}
				r.Expiration.Date = d
			}
			if e.ExpiredObjectDeleteMarker != nil {
				r.Expiration.DeleteMarker = *e.ExpiredObjectDeleteMarker
			}
		}
		for _, t := range x.Transitions {
			tr := lifecycle.Transition{Class: className(t.StorageClass)}
			if t.Days != nil {
				if *t.Days < 0 {
					return lifecycle.Config{}, invalidLifecycle("'Days' for Transition action must be a positive integer")
				}
				tr.Days = *t.Days
			}
			if t.Date != nil {
				d, err := parseLifecycleDate(*t.Date)
				if err != nil {
					return lifecycle.Config{}, err
				}
				tr.Date = d
			}
			r.Transition = append(r.Transition, tr)
		}
		if x.Abort != nil {
			if x.Abort.Days <= 0 {
				return lifecycle.Config{}, invalidLifecycle("'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer")
			}
			r.AbortDays = x.Abort.Days
		}
		if x.Noncurrent != nil {
			r.NoncurrentDays = x.Noncurrent.Days
		}
		if len(x.NoncurrentTransitions) > 0 {
			return lifecycle.Config{}, errLifecycleNoncurrentTransition
		}
		cfg.Rules = append(cfg.Rules, r)
	}
	classes := b.layer.Options().Classes
	if err := cfg.Validate(func(c string) bool { _, ok := classes[c]; return ok }); err != nil {
		return lifecycle.Config{}, invalidLifecycle(strings.TrimPrefix(err.Error(), lifecycle.ErrInvalid.Error()+": "))
	}
	return cfg, nil
}

// lifecycleDoc is the GetBucketLifecycleConfiguration answer.
func lifecycleDoc(cfg lifecycle.Config) any {
	type tag struct{ Key, Value string }
	type and struct {
		Prefix                *string `xml:"Prefix,omitempty"`
		Tags                  []tag   `xml:"Tag"`
		ObjectSizeGreaterThan *int64  `xml:"ObjectSizeGreaterThan,omitempty"`
		ObjectSizeLessThan    *int64  `xml:"ObjectSizeLessThan,omitempty"`
	}
	type filter struct {
		Prefix *string `xml:"Prefix,omitempty"`
		Tag    *tag    `xml:"Tag,omitempty"`
		And    *and    `xml:"And,omitempty"`
	}
	type when struct {
		Days         int    `xml:"Days,omitempty"`
		Date         string `xml:"Date,omitempty"`
		StorageClass string `xml:"StorageClass,omitempty"`
	}
	type rule struct {
		ID                             string `xml:"ID,omitempty"`
		Filter                         filter
		Status                         string
		Expiration                     *when `xml:"Expiration,omitempty"`
		Transition                     []when
		AbortIncompleteMultipartUpload *struct{ DaysAfterInitiation int } `xml:"AbortIncompleteMultipartUpload,omitempty"`
		NoncurrentVersionExpiration    *struct{ NoncurrentDays int }      `xml:"NoncurrentVersionExpiration,omitempty"`
	}
	doc := struct {
		XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ LifecycleConfiguration"`
		Rules   []rule   `xml:"Rule"`
	}{}
	date := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	for _, r := range cfg.Rules {
		x := rule{ID: r.ID, Status: "Disabled"}
		if r.Enabled {
			x.Status = "Enabled"
		}
		prefix := r.Prefix
		var gt, lt *int64
		if r.MinSize > 0 {
			gt = &r.MinSize
		}
		if r.MaxSize > 0 {
			lt = &r.MaxSize
		}
		switch {
		case len(r.Tags) > 1 || (len(r.Tags) == 1 && (prefix != "" || gt != nil || lt != nil)) || (prefix != "" && (gt != nil || lt != nil)):
			a := &and{ObjectSizeGreaterThan: gt, ObjectSizeLessThan: lt}
			if prefix != "" {
				a.Prefix = &prefix
			}
			for k, v := range r.Tags {
				a.Tags = append(a.Tags, tag{k, v})
			}
			x.Filter.And = a
		case len(r.Tags) == 1:
			for k, v := range r.Tags {
				x.Filter.Tag = &tag{k, v}
			}
		case gt != nil || lt != nil:
			x.Filter.And = &and{ObjectSizeGreaterThan: gt, ObjectSizeLessThan: lt}
		default:
			x.Filter.Prefix = &prefix
		}
		if e := r.Expiration; e != nil {
			x.Expiration = &when{Days: e.Days, Date: date(e.Date)}
		}
		for _, t := range r.Transition {
			x.Transition = append(x.Transition, when{Days: t.Days, Date: date(t.Date), StorageClass: t.Class})
		}
		if r.AbortDays > 0 {
			x.AbortIncompleteMultipartUpload = &struct{ DaysAfterInitiation int }{r.AbortDays}
		}
		if r.NoncurrentDays > 0 {
			x.NoncurrentVersionExpiration = &struct{ NoncurrentDays int }{r.NoncurrentDays}
		}
		doc.Rules = append(doc.Rules, x)
	}
	return doc
}

func (b *Backend) lifecycleRoutes() []bucketRoute {
	return []bucketRoute{
		{method: http.MethodPut, query: "lifecycle", metric: metrics.ActionPutBucketLifecycleConfiguration,
			action: auth.PutLifecycleConfigurationAction, perm: auth.PermissionWrite,
			ctrl: func(ctx fiber.Ctx, bucket string) (*controllers.Response, error) {
				cfg, err := b.parseLifecycle(ctx.Body())
				if err != nil {
					return nil, err
				}
				raw, err := json.Marshal(cfg)
				if err != nil {
					return nil, err
				}
				return nil, b.putAttr(ctx.RequestCtx(), "PutBucketLifecycleConfiguration", bucket, lifecycle.BucketAttr, raw)
			}},
		{method: http.MethodGet, query: "lifecycle", metric: metrics.ActionGetBucketLifecycleConfiguration,
			action: auth.GetLifecycleConfigurationAction, perm: auth.PermissionRead,
			ctrl: func(ctx fiber.Ctx, bucket string) (*controllers.Response, error) {
				raw, err := b.getAttr(ctx.RequestCtx(), "GetBucketLifecycleConfiguration", bucket, lifecycle.BucketAttr, errNoLifecycle)
				if err != nil {
					return nil, err
				}
				var cfg lifecycle.Config
				if err := json.Unmarshal(raw, &cfg); err != nil {
					return nil, b.mapErr("GetBucketLifecycleConfiguration", errors.New("corrupt lifecycle configuration"), bucket)
				}
				return &controllers.Response{Data: lifecycleDoc(cfg)}, nil
			}},
		{method: http.MethodDelete, query: "lifecycle", metric: metrics.ActionDeleteBucketLifecycle,
			action: auth.PutLifecycleConfigurationAction, perm: auth.PermissionWrite,
			ctrl: func(ctx fiber.Ctx, bucket string) (*controllers.Response, error) {
				err := b.putAttr(ctx.RequestCtx(), "DeleteBucketLifecycle", bucket, lifecycle.BucketAttr, nil)
				return &controllers.Response{MetaOpts: &controllers.MetaOptions{Status: http.StatusNoContent}}, err
			}},
	}
}
