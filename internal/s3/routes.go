package s3

import (
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/s3api"
	"github.com/versity/versitygw/s3api/controllers"
	"github.com/versity/versitygw/s3api/middlewares"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"
)

// Bucket sub-resources that versitygw routes to a fixed NotImplemented
// (encryption, lifecycle, public-access-block) are served by Terrace's own
// controllers, mounted in front of versitygw's route table with
// s3api.WithRoute. Each route runs versitygw's own middleware chain
// (signature and presigned-URL verification, public-bucket access, bucket
// ACL parsing) and authorizes with versitygw's auth.VerifyAccess, exactly
// as versitygw's routes do, so bucket policies and ACLs apply unchanged.
//
// Routes are mounted before versitygw's SetDefaultValues middleware, so
// each route sets those request locals itself (setRequestDefaults), and
// they match path-style requests only (virtual-host parsing runs later).

// routeEnv is what the route chains need from the gateway configuration.
type routeEnv struct {
	be     *Backend
	root   middlewares.RootUserConfig
	iam    auth.IAMService
	region string
}

// bucketRoute describes one Terrace-served bucket sub-resource operation.
type bucketRoute struct {
	method string
	query  string
	metric string      // versitygw metrics action name
	action auth.Action // policy action
	perm   auth.Permission
	ctrl   func(ctx fiber.Ctx, bucket string) (*controllers.Response, error)
}

// setRequestDefaults is versitygw's SetDefaultValues without the
// ctx.Next(): the request locals later middlewares expect.
func (e routeEnv) setRequestDefaults(ctx fiber.Ctx) error {
	utils.ContextKeyRegion.Set(ctx, e.region)
	utils.ContextKeyStartTime.Set(ctx, time.Now())
	utils.ContextKeyRootAccessKey.Set(ctx, e.root.Access)
	utils.ContextKeyAccount.Set(ctx, auth.Account{})
	utils.ContextKeyIsRoot.Set(ctx, false)
	return nil
}

// option mounts the route.
func (e routeEnv) option(r bucketRoute) s3api.Option {
	services := &controllers.Services{}
	ctrl := func(ctx fiber.Ctx) (*controllers.Response, error) {
		bucket := ctx.Params("bucket")
		acl := utils.ContextKeyParsedAcl.Get(ctx).(auth.ACL)
		isRoot, _ := utils.ContextKeyIsRoot.Get(ctx).(bool)
		acct, _ := utils.ContextKeyAccount.Get(ctx).(auth.Account)
		err := auth.VerifyAccess(ctx, e.be, auth.AccessOptions{
			Acl: acl, AclPermission: r.perm, IsRoot: isRoot, Acc: acct, Bucket: bucket,
			Actions: []auth.Action{r.action}, IsPublicRequest: utils.ContextKeyPublicBucket.IsSet(ctx), Iam: e.iam,
		})
		if err != nil {
			return &controllers.Response{MetaOpts: &controllers.MetaOptions{BucketOwner: acl.Owner}}, err
		}
		res, err := r.ctrl(ctx, bucket)
		if res == nil {
			res = &controllers.Response{}
		}
		if res.MetaOpts == nil {
			res.MetaOpts = &controllers.MetaOptions{}
		}
		res.MetaOpts.BucketOwner = acl.Owner
		return res, err
	}
	return s3api.WithRoute(r.method, "/:bucket",
		middlewares.MatchQueryArgs(r.query),
		controllers.ProcessHandlers(ctrl, r.metric, services,
			e.setRequestDefaults,
			middlewares.BucketObjectNameValidator(),
			middlewares.AuthorizePublicBucketAccess(e.be, r.metric, r.action, r.perm, e.region, false),
			middlewares.VerifyPresignedV4Signature(e.root, e.iam, e.region, false),
			middlewares.VerifyV4Signature(e.root, e.iam, e.region, false, true, false),
			middlewares.ParseAcl(e.be),
		))
}

// errMalformedXML is AWS's answer to an unparsable configuration body.
var errMalformedXML = s3err.GetAPIError(s3err.ErrMalformedXML)
