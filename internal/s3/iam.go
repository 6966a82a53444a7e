package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/s3err"

	"github.com/terrace-storage/terrace/internal/users"
)

// StoreIAM is versitygw's auth.IAMService over Terrace's user store: the
// root account plus the users in the metadata store, which every node
// reads directly (no cache), so a user added, rotated or removed on one
// node is seen by all at once.
//
// The identity versitygw works with (Account.Access: bucket owner, ACL
// grantee, bucket-policy principal) is the user's name, not the access
// key: rotating keys changes nothing a user owns or was granted. versitygw
// itself only ever looks accounts up by the access key of a request
// (GetUserAccount) or by identity (ResolveAccounts).
type StoreIAM struct {
	store   *users.Store
	root    string
	timeout time.Duration
	// owner returns a bucket's owner (set by Serve from the backend).
	owner func(ctx context.Context, bucket string) (string, error)
}

var (
	_ auth.IAMService        = (*StoreIAM)(nil)
	_ auth.PrincipalResolver = (*StoreIAM)(nil)
	_ auth.PolicyEvaluator   = (*StoreIAM)(nil)
)

// NewStoreIAM returns the IAM service; root is the root account's access
// key (its identity too).
func NewStoreIAM(store *users.Store, root string) *StoreIAM {
	return &StoreIAM{store: store, root: root, timeout: 10 * time.Second}
}

func (s *StoreIAM) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.timeout)
}

// roleOf is versitygw's role of a user: admin, else "userplus" — a user
// who may create buckets, as every AWS account may (versitygw's plain
// "user" may only use buckets an admin assigned to it).
func roleOf(admin bool) auth.Role {
	if admin {
		return auth.RoleAdmin
	}
	return auth.RoleUserPlus
}

// iamErr maps store errors to what versitygw's admin API and
// authentication expect.
func iamErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, users.ErrNoSuchUser):
		return auth.ErrNoSuchUser
	case errors.Is(err, users.ErrNameInUse):
		// ErrAdminUserExists, with the buckets that hold the name.
		return s3err.APIError{Code: "XAdminUserExists", Description: err.Error(), HTTPStatusCode: http.StatusConflict}
	case errors.Is(err, users.ErrUserExists):
		return s3err.GetAPIError(s3err.ErrAdminUserExists)
	case errors.Is(err, users.ErrInvalidName):
		return s3err.GetAPIError(s3err.ErrAdminInvalidUserRole)
	}
	return err
}

// CreateAccount serves versitygw's admin API (create-user): the access
// key names the user.
func (s *StoreIAM) CreateAccount(a auth.Account) error {
	ctx, cancel := s.ctx()
	defer cancel()
	_, err := s.store.AddWithKeys(ctx, a.Access, a.Access, a.Secret, a.Role == auth.RoleAdmin)
	return iamErr(err)
}

// GetUserAccount resolves a request's access key. Unknown keys are
// auth.ErrNoSuchUser, which versitygw answers with InvalidAccessKeyId.
func (s *StoreIAM) GetUserAccount(access string) (auth.Account, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	u, secret, err := s.store.Authenticate(ctx, access)
	if err != nil {
		return auth.Account{}, iamErr(err)
	}
	return auth.Account{Access: u.Name, Secret: secret, Role: roleOf(u.Admin)}, nil
}

// missing returns the identities (user names) that do not exist.
func (s *StoreIAM) missing(names []string) ([]string, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	out := []string{}
	for _, n := range names {
		if n == s.root {
			continue
		}
		ok, err := s.store.Exists(ctx, n)
		if err != nil {
			return nil, err
		}
		if !ok {
			out = append(out, n)
		}
	}
	return out, nil
}

// errInvalidGrantee is AWS's answer to an ACL grant naming an unknown
// account.
var errInvalidGrantee = s3err.APIError{Code: "InvalidArgument", Description: "Invalid id", HTTPStatusCode: 400}

// ResolveAccounts checks the grantees of an ACL (versitygw calls it only
// for ACL grants and its admin API; bucket policies go through
// ResolvePrincipals). Grant headers in AWS's syntax (id="NAME",
// uri="…/AllUsers") are accepted; an unknown grantee is 400 InvalidArgument
// "Invalid id" as on AWS (versitygw would turn a returned list into 500).
func (s *StoreIAM) ResolveAccounts(grantees []string) ([]string, error) {
	var names []string
	for _, g := range grantees {
		kind, id := parseGrantee(g)
		switch kind {
		case granteeUser:
			names = append(names, id)
		case granteeAllUsers:
		default:
			return nil, errUnsupportedGrantee
		}
	}
	missing, err := s.missing(names)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, errInvalidGrantee
	}
	return nil, nil
}

// ResolvePrincipals returns the bucket-policy principals (user names) that
// do not exist.
func (s *StoreIAM) ResolvePrincipals(principals []string) ([]string, error) {
	return s.missing(principals)
}

// EvaluatePolicy is the identity side of versitygw's authorization. Every
// Terrace user is its own account, and an account has full access to the
// buckets it owns: so a bucket's owner is allowed every action on the
// bucket and its objects. (versitygw consults bucket ACLs — where the
// owner's FULL_CONTROL grant lives — only when a bucket has no policy; with
// this the owner keeps access after attaching a policy that does not name
// it, as on AWS. An explicit Deny in the bucket policy still wins.)
// Every account may also create buckets and list its own
// (s3:CreateBucket, s3:ListAllMyBuckets). Anything else is no match: the
// bucket policy or ACL decides.
func (s *StoreIAM) EvaluatePolicy(access, _ string, actions []auth.Action, resources []string, _ map[string][]string) (auth.PolicyEvaluation, error) {
	var ev auth.PolicyEvaluation
	ctx, cancel := s.ctx()
	defer cancel()
	owners := map[string]string{}
	for _, res := range resources {
		bucket, _, _ := strings.Cut(strings.TrimPrefix(res, auth.ResourceArnPrefix), "/")
		owner, ok := owners[bucket]
		if !ok && s.owner != nil && bucket != "" {
			o, err := s.owner(ctx, bucket)
			if err != nil {
				return auth.PolicyEvaluation{}, err
			}
			owners[bucket], owner = o, o
		}
		ev.Decisions = append(ev.Decisions, nil)
		row := &ev.Decisions[len(ev.Decisions)-1]
		for _, a := range actions {
			// auth's decision values are unexported constants (no match
			// 0, allow 1); untyped constants are assignable to them.
			// Every account may create buckets and list its own.
			if (owner != "" && owner == access) || a == auth.CreateBucketAction || a == auth.ListAllMyBucketsAction {
				*row = append(*row, 1)
			} else {
				*row = append(*row, 0)
			}
		}
	}
	return ev, nil
}

// nameInUse is the users.NameInUseFunc of the store: what still refers to
// a user name — the buckets it owns, and those whose ACL grants it or
// whose policy names it as a principal. A user created under the name
// would get all of it, since the name is the identity. Object ACLs are
// not looked at: they are recorded, not enforced. An ACL or policy that
// does not parse counts if it mentions the name at all.
func (b *Backend) nameInUse(ctx context.Context, name string) (string, error) {
	all, err := b.layer.ListBuckets(ctx)
	if err != nil {
		return "", err
	}
	var owns, grants, policies []string
	for _, bk := range all {
		if bk.Owner == name || bucketOwner(bk) == name {
			owns = append(owns, bk.Name)
		}
		if raw := bk.Attrs[attrACL]; len(raw) > 0 && aclNames(raw, name) {
			grants = append(grants, bk.Name)
		}
		if raw := bk.Attrs[attrPolicy]; len(raw) > 0 && policyNames(raw, name) {
			policies = append(policies, bk.Name)
		}
	}
	var what []string
	for _, r := range []struct {
		verb    string
		buckets []string
	}{{"owns bucket", owns}, {"is granted access by the ACL of bucket", grants}, {"is a principal in the policy of bucket", policies}} {
		if len(r.buckets) == 0 {
			continue
		}
		const shown = 5
		list := strings.Join(r.buckets[:min(len(r.buckets), shown)], ", ")
		if len(r.buckets) > shown {
			list += fmt.Sprintf(" and %d more", len(r.buckets)-shown)
		}
		what = append(what, r.verb+" "+list)
	}
	return strings.Join(what, "; "), nil
}

// aclNames reports whether a bucket ACL grants name anything.
func aclNames(raw []byte, name string) bool {
	acl, err := auth.ParseACL(raw)
	if err != nil {
		return bytes.Contains(raw, []byte(strconv.Quote(name)))
	}
	return slices.ContainsFunc(acl.Grantees, func(g auth.Grantee) bool { return g.Access == name })
}

// policyNames reports whether a bucket policy names name as a principal.
func policyNames(raw []byte, name string) bool {
	p, err := auth.ParsePolicyDocument(raw)
	if err != nil {
		return bytes.Contains(raw, []byte(strconv.Quote(name)))
	}
	for _, st := range p.Statement {
		if _, ok := st.Principals[name]; ok {
			return true
		}
	}
	return false
}

// UpdateUserAccount serves versitygw's admin API (secret and role).
func (s *StoreIAM) UpdateUserAccount(access string, props auth.MutableProps) error {
	ctx, cancel := s.ctx()
	defer cancel()
	u, _, err := s.store.Authenticate(ctx, access)
	if err != nil {
		return iamErr(err)
	}
	var admin *bool
	if props.Role != "" {
		a := props.Role == auth.RoleAdmin
		admin = &a
	}
	return iamErr(s.store.Update(ctx, u.Name, props.Secret, admin))
}

// DeleteUserAccount serves versitygw's admin API.
func (s *StoreIAM) DeleteUserAccount(access string) error {
	ctx, cancel := s.ctx()
	defer cancel()
	u, _, err := s.store.Authenticate(ctx, access)
	if err != nil {
		return iamErr(err)
	}
	return iamErr(s.store.Remove(ctx, u.Name))
}

// ListUserAccounts serves versitygw's admin API (no secrets).
func (s *StoreIAM) ListUserAccounts() ([]auth.Account, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	all, err := s.store.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]auth.Account, 0, len(all))
	for _, u := range all {
		out = append(out, auth.Account{Access: u.Name, Role: roleOf(u.Admin)})
	}
	return out, nil
}

// Shutdown has nothing to release: the store belongs to the node.
func (s *StoreIAM) Shutdown() error { return nil }
