package s3

import (
	"context"
	"errors"
	"net/http"

	"github.com/versity/versitygw/s3err"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// Errors versitygw's table has no entry for. Codes and statuses are AWS's
// where AWS has one.
var (
	// errInsufficientStorage answers writes the tiers cannot hold. versitygw
	// maps ENOSPC to the same code and status (ErrNoSpaceLeftOnDevice); the
	// description says what actually happened.
	errInsufficientStorage = s3err.APIError{
		Code: "InsufficientStorage",
		Description: "Terrace cannot place every replica this object's replication vector requires: " +
			"the tiers it names are full or have too few devices.",
		HTTPStatusCode: http.StatusInsufficientStorage,
	}
	// errConditionalConflict is AWS's answer when a conditional write races
	// with another write to the same key.
	errConditionalConflict = s3err.APIError{
		Code:           "ConditionalRequestConflict",
		Description:    "A conflicting operation occurred. If using PutObject you can retry the request.",
		HTTPStatusCode: http.StatusConflict,
	}
	// errInvalidStorageClass is AWS's answer to an unknown
	// x-amz-storage-class; Terrace also uses it for a class whose vector
	// names a tier the cluster does not have.
	errInvalidStorageClass = s3err.APIError{
		Code:           "InvalidStorageClass",
		Description:    "The storage class you specified is not valid.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	errBadContinuationToken = s3err.APIError{
		Code:           "InvalidArgument",
		Description:    "The continuation token provided is incorrect.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	errKeyHasNUL = s3err.APIError{
		Code:           "InvalidArgument",
		Description:    "Object key must not contain a NUL byte.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	// errKeyNotUTF8: S3 keys are Unicode; a key that is not valid UTF-8
	// could not be returned in a listing's XML.
	errKeyNotUTF8 = s3err.APIError{
		Code:           "InvalidArgument",
		Description:    "Object key must be valid UTF-8.",
		HTTPStatusCode: http.StatusBadRequest,
	}
	// errConflict answers a compare-and-swap that kept losing to
	// concurrent writers (AWS's OperationAborted).
	errConflict = s3err.APIError{
		Code:           "OperationAborted",
		Description:    "A conflicting operation is in progress against this resource. Please try again.",
		HTTPStatusCode: http.StatusConflict,
	}
	errNoGoodReplica = s3err.APIError{
		Code:           "InternalError",
		Description:    "No replica of part of this object could be read and verified; it is being repaired.",
		HTTPStatusCode: http.StatusInternalServerError,
	}
)

// mapErr translates an object-layer error into the s3err error versitygw
// encodes. Errors that already are s3err errors (for example a checksum
// mismatch detected by a versitygw reader inside the write path) pass
// through. Anything unexpected is logged with op and answered as
// InternalError, so no internal detail leaks to clients.
func (b *Backend) mapErr(op string, err error, bucket string) error {
	if err == nil {
		return nil
	}
	var se s3err.S3Error
	if errors.As(err, &se) {
		return se
	}
	switch {
	case errors.Is(err, object.ErrNoSuchBucket):
		return s3err.GetBucketErr(s3err.ErrNoSuchBucket, bucket)
	case errors.Is(err, object.ErrNoSuchKey):
		return s3err.GetAPIError(s3err.ErrNoSuchKey)
	case errors.Is(err, object.ErrBucketExists):
		return s3err.GetBucketErr(s3err.ErrBucketAlreadyExists, bucket)
	case errors.Is(err, object.ErrBucketNotEmpty):
		return s3err.GetBucketErr(s3err.ErrBucketNotEmpty, bucket)
	case errors.Is(err, object.ErrInvalidBucketName):
		return s3err.GetBucketErr(s3err.ErrInvalidBucketName, bucket)
	case errors.Is(err, object.ErrInvalidKey):
		return s3err.GetAPIError(s3err.ErrBadRequest)
	case errors.Is(err, object.ErrInvalidRange):
		return s3err.GetAPIError(s3err.ErrInvalidRange)
	case errors.Is(err, object.ErrNoSuchUpload):
		return s3err.GetAPIError(s3err.ErrNoSuchUpload)
	case errors.Is(err, object.ErrInvalidPartOrder):
		return s3err.GetAPIError(s3err.ErrInvalidPartOrder)
	case errors.Is(err, object.ErrInvalidPart):
		return s3err.GetAPIError(s3err.ErrInvalidPart)
	case errors.Is(err, object.ErrEntityTooSmall):
		return s3err.GetEntityTooSmallErr(0, object.MinPartBytes)
	case errors.Is(err, object.ErrTooLarge):
		return s3err.GetEntityTooLargeErr(0, b.layer.Options().MaxObjectBytes)
	case errors.Is(err, object.ErrInsufficientStorage):
		return errInsufficientStorage
	case errors.Is(err, object.ErrBadDigest):
		return s3err.GetAPIError(s3err.ErrBadDigest)
	case errors.Is(err, object.ErrUnknownClass), errors.Is(err, model.ErrInvalidVector):
		return errInvalidStorageClass
	case errors.Is(err, object.ErrConditionalConflict):
		return errConditionalConflict
	case errors.Is(err, object.ErrSourceChanged):
		return errConflict
	case errors.Is(err, object.ErrBucketBusy):
		return errConflict
	case errors.Is(err, object.ErrNoSuchVersion):
		return s3err.GetAPIError(s3err.ErrNoSuchVersion)
	case errors.Is(err, object.ErrReadOnly):
		return s3err.GetAPIError(s3err.ErrAccessDenied)
	case errors.Is(err, object.ErrInvalidVersioning):
		return s3err.GetAPIError(s3err.ErrMalformedXML)
	case errors.Is(err, object.ErrIncompleteBody):
		return s3err.GetAPIError(s3err.ErrIncompleteBody)
	case errors.Is(err, object.ErrConflict):
		return errConflict
	case errors.Is(err, object.ErrNoGoodReplica):
		b.log.Error("s3: unreadable object data", "op", op, "bucket", bucket, "err", err)
		return errNoGoodReplica
	case errors.Is(err, context.Canceled):
		// The client went away or the server is stopping; nobody reads
		// the answer.
		return s3err.GetAPIError(s3err.ErrInternalError)
	}
	b.log.Error("s3: internal error", "op", op, "bucket", bucket, "err", err)
	return s3err.GetAPIError(s3err.ErrInternalError)
}
