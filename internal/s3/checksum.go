package s3

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/s3api/middlewares"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"

	"github.com/terrace-storage/terrace/internal/object"
)

// Checksums (x-amz-checksum-*). Every write is verified against the
// checksum the client sends (header or aws-chunked trailer; versitygw
// verifies trailers, verifyBody headers) and the checksum is stored with
// the object — or the part — under its header name, with
// x-amz-checksum-type FULL_OBJECT or COMPOSITE. Checksums are of the
// plaintext: they are computed before encryption.
//
// Multipart: CreateMultipartUpload's algorithm and type (COMPOSITE by
// default, FULL_OBJECT for CRC64NVME or on request) are kept with the
// upload; each part's checksum is stored with the part; completion checks
// the checksums the request lists and computes the object's: a COMPOSITE
// checksum is the checksum of the concatenated binary part checksums,
// "-N" (as AWS computes it); a FULL_OBJECT CRC is combined from the part
// CRCs and lengths, equal to the CRC of the whole object.
//
// GET and HEAD return the stored checksum when asked (x-amz-checksum-mode:
// ENABLED) for whole-object reads.

// Stored keys of an upload's checksum settings.
const (
	hdrUploadChecksumAlg  = "x-terrace-checksum-algorithm"
	hdrUploadChecksumType = "x-terrace-checksum-type"
)

// checksumAlgs lists the algorithms with their stored header name and
// versitygw hash type.
var checksumAlgs = []struct {
	alg types.ChecksumAlgorithm
	ht  utils.HashType
}{
	{types.ChecksumAlgorithmCrc32, utils.HashTypeCRC32},
	{types.ChecksumAlgorithmCrc32c, utils.HashTypeCRC32C},
	{types.ChecksumAlgorithmCrc64nvme, utils.HashTypeCRC64NVME},
	{types.ChecksumAlgorithmSha1, utils.HashTypeSha1},
	{types.ChecksumAlgorithmSha256, utils.HashTypeSha256},
	{types.ChecksumAlgorithmSha512, utils.HashTypeSha512},
	{types.ChecksumAlgorithmMd5, utils.HashTypeMd5},
	{types.ChecksumAlgorithmXxhash64, utils.HashTypeXXHASH64},
	{types.ChecksumAlgorithmXxhash3, utils.HashTypeXXHASH3},
	{types.ChecksumAlgorithmXxhash128, utils.HashTypeXXHASH128},
}

// checksumHeader is the stored (and wire) header of an algorithm.
func checksumHeader(alg types.ChecksumAlgorithm) string {
	return "x-amz-checksum-" + strings.ToLower(string(alg))
}

func hashTypeOf(alg types.ChecksumAlgorithm) (utils.HashType, bool) {
	for _, a := range checksumAlgs {
		if strings.EqualFold(string(a.alg), string(alg)) {
			return a.ht, true
		}
	}
	return "", false
}

// checksumHeaders are the x-amz-checksum-* values of a PutObject or
// UploadPart request.
type checksumHeaders struct {
	CRC32, CRC32C, CRC64NVME, SHA1, SHA256, SHA512, MD5, XXHASH64, XXHASH3, XXHASH128 *string
}

func (c checksumHeaders) values() []*string {
	return []*string{c.CRC32, c.CRC32C, c.CRC64NVME, c.SHA1, c.SHA256, c.SHA512, c.MD5, c.XXHASH64, c.XXHASH3, c.XXHASH128}
}

// bodyChecksum is the checksum of a body being stored, known once the
// body was read to EOF.
type bodyChecksum struct {
	alg     types.ChecksumAlgorithm
	hr      *utils.HashReader          // header checksum (verified) or computed
	trailer middlewares.ChecksumReader // aws-chunked trailer (verified by versitygw)
}

// value is the checksum (base64) after EOF; "" if none.
func (c *bodyChecksum) value() string {
	switch {
	case c == nil:
		return ""
	case c.trailer != nil:
		return c.trailer.Checksum()
	case c.hr != nil:
		return c.hr.Sum()
	}
	return ""
}

// headers are the stored headers of a simple object's checksum.
func (c *bodyChecksum) headers() map[string]string {
	v := c.value()
	if v == "" {
		return nil
	}
	return map[string]string{checksumHeader(c.alg): v, hdrChecksumType: string(types.ChecksumTypeFullObject)}
}

// verifyBody wraps a request body so that reading it to EOF fails when the
// body does not match its declared checksum or is shorter than declared,
// and reports the body's checksum after EOF. Trailing checksums of
// aws-chunked bodies are verified by versitygw's chunk reader (the body
// then implements middlewares.ChecksumReader); header checksums are
// verified here, with versitygw's hash reader. want, when set, is an
// algorithm to compute when the request carries no checksum (a part of an
// upload that has one). declared < 0 means unknown length.
func verifyBody(body io.Reader, declared int64, cs checksumHeaders, want types.ChecksumAlgorithm) (io.Reader, *bodyChecksum, error) {
	if body == nil {
		body = strings.NewReader("")
	}
	var bc *bodyChecksum
	if cr, ok := body.(middlewares.ChecksumReader); ok && cr.Algorithm() != "" {
		bc = &bodyChecksum{alg: types.ChecksumAlgorithm(strings.ToUpper(cr.Algorithm())), trailer: cr}
	} else {
		for i, v := range cs.values() {
			if v == nil || *v == "" {
				continue
			}
			hr, err := utils.NewHashReader(body, *v, checksumAlgs[i].ht)
			if err != nil {
				return nil, nil, s3err.GetAPIError(s3err.ErrInvalidChecksumHeader)
			}
			body, bc = hr, &bodyChecksum{alg: checksumAlgs[i].alg, hr: hr}
			break
		}
		if bc == nil && want != "" {
			ht, ok := hashTypeOf(want)
			if !ok {
				return nil, nil, s3err.GetAPIError(s3err.ErrInvalidChecksumHeader)
			}
			hr, err := utils.NewHashReader(body, "", ht)
			if err != nil {
				return nil, nil, s3err.GetAPIError(s3err.ErrInvalidChecksumHeader)
			}
			body, bc = hr, &bodyChecksum{alg: want, hr: hr}
		}
	}
	return &lengthReader{r: body, declared: declared}, bc, nil
}

// lengthReader fails a body that ends before its declared length. The
// object layer is given an unknown size so that it reads to EOF, which is
// when the checksum readers underneath verify.
type lengthReader struct {
	r        io.Reader
	declared int64
	n        int64
}

func (l *lengthReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	if err == io.EOF && l.declared >= 0 && l.n < l.declared {
		return n, s3err.GetAPIError(s3err.ErrIncompleteBody)
	}
	return n, err
}

// storedChecksum returns an object's stored checksum: algorithm, value and
// type ("" if none).
func storedChecksum(h map[string]string) (types.ChecksumAlgorithm, string, types.ChecksumType) {
	for _, a := range checksumAlgs {
		if v := h[checksumHeader(a.alg)]; v != "" {
			t := types.ChecksumType(h[hdrChecksumType])
			if t == "" {
				t = types.ChecksumTypeFullObject
			}
			return a.alg, v, t
		}
	}
	return "", "", ""
}

// checksumFields fills the Checksum* fields of a response from a stored
// checksum.
type checksumFields struct {
	CRC32, CRC32C, CRC64NVME, SHA1, SHA256, SHA512, MD5, XXHASH64, XXHASH3, XXHASH128 *string
	Type                                                                              types.ChecksumType
}

func checksumOut(h map[string]string) checksumFields {
	alg, v, t := storedChecksum(h)
	var f checksumFields
	if v == "" {
		return f
	}
	f.Type = t
	p := &v
	switch alg {
	case types.ChecksumAlgorithmCrc32:
		f.CRC32 = p
	case types.ChecksumAlgorithmCrc32c:
		f.CRC32C = p
	case types.ChecksumAlgorithmCrc64nvme:
		f.CRC64NVME = p
	case types.ChecksumAlgorithmSha1:
		f.SHA1 = p
	case types.ChecksumAlgorithmSha256:
		f.SHA256 = p
	case types.ChecksumAlgorithmSha512:
		f.SHA512 = p
	case types.ChecksumAlgorithmMd5:
		f.MD5 = p
	case types.ChecksumAlgorithmXxhash64:
		f.XXHASH64 = p
	case types.ChecksumAlgorithmXxhash3:
		f.XXHASH3 = p
	case types.ChecksumAlgorithmXxhash128:
		f.XXHASH128 = p
	}
	return f
}

// uploadChecksum is the checksum algorithm and type of a multipart upload
// ("" if none).
func uploadChecksum(h map[string]string) (types.ChecksumAlgorithm, types.ChecksumType) {
	return types.ChecksumAlgorithm(h[hdrUploadChecksumAlg]), types.ChecksumType(h[hdrUploadChecksumType])
}

// uploadChecksumHeaders validates CreateMultipartUpload's checksum
// algorithm and type (AWS's defaults and rules) and returns what to store.
func uploadChecksumHeaders(alg types.ChecksumAlgorithm, typ types.ChecksumType) (map[string]string, error) {
	alg = types.ChecksumAlgorithm(strings.ToUpper(string(alg)))
	if alg == "" {
		if typ != "" {
			return nil, s3err.GetAPIError(s3err.ErrChecksumTypeWithAlgo)
		}
		return nil, nil
	}
	if _, ok := hashTypeOf(alg); !ok {
		return nil, s3err.GetAPIError(s3err.ErrInvalidChecksumAlgorithm)
	}
	if typ == "" {
		typ = types.ChecksumTypeComposite
		if alg == types.ChecksumAlgorithmCrc64nvme {
			typ = types.ChecksumTypeFullObject
		}
	}
	switch {
	case typ == types.ChecksumTypeFullObject && !utils.IsChecksumComposable(alg):
		return nil, s3err.GetChecksumSchemaMismatchErr(alg, typ)
	case typ == types.ChecksumTypeComposite && alg == types.ChecksumAlgorithmCrc64nvme:
		return nil, s3err.GetChecksumSchemaMismatchErr(alg, typ)
	case typ != types.ChecksumTypeFullObject && typ != types.ChecksumTypeComposite:
		return nil, s3err.GetInvalidChecksumHeaderErr("x-amz-checksum-type")
	}
	return map[string]string{hdrUploadChecksumAlg: string(alg), hdrUploadChecksumType: string(typ)}, nil
}

// completedPart is a part listed in CompleteMultipartUpload with what the
// gateway knows of it.
type completedPart struct {
	num       int
	plainSize int64
	stored    string // the part's stored checksum of the upload's algorithm
	requested string // the checksum the request lists for it ("" if none)
}

// multipartChecksum computes a completed object's checksum from its parts.
// Parts whose listed checksum differs from the stored one are InvalidPart,
// as are parts without a checksum when the upload has an algorithm.
func multipartChecksum(alg types.ChecksumAlgorithm, typ types.ChecksumType, parts []completedPart) (map[string]string, error) {
	if alg == "" {
		return nil, nil
	}
	for _, p := range parts {
		if p.stored == "" || (p.requested != "" && p.requested != p.stored) {
			return nil, s3err.GetAPIError(s3err.ErrInvalidPart)
		}
	}
	var sum string
	switch typ {
	case types.ChecksumTypeFullObject:
		sum = parts[0].stored
		for _, p := range parts[1:] {
			var err error
			if sum, err = utils.AddCRCChecksum(alg, sum, p.stored, p.plainSize); err != nil {
				return nil, fmt.Errorf("s3: combine part checksums: %w", err)
			}
		}
	default:
		ht, _ := hashTypeOf(alg)
		cr, err := utils.NewCompositeChecksumReader(ht)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			if err := cr.Process(p.stored); err != nil {
				return nil, s3err.GetAPIError(s3err.ErrInvalidPart)
			}
		}
		sum = fmt.Sprintf("%s-%d", cr.Sum(), len(parts))
	}
	return map[string]string{checksumHeader(alg): sum, hdrChecksumType: string(typ)}, nil
}

// checksumModeEnabled reports whether a GET/HEAD asked for checksums.
func checksumModeEnabled(mode types.ChecksumMode) bool {
	return strings.EqualFold(string(mode), string(types.ChecksumModeEnabled))
}

// setResponseHeader sets a header on the response of the underlying
// request (headers versitygw's controllers do not write).
func setResponseHeader(ctx context.Context, name, value string) {
	if rc, ok := ctx.(*fasthttp.RequestCtx); ok && rc != nil && value != "" {
		rc.Response.Header.Set(name, value)
	}
}

// partHeaders are the stored attributes of a part's checksum.
func (c *bodyChecksum) partHeaders() map[string]string {
	v := c.value()
	if v == "" {
		return nil
	}
	return map[string]string{checksumHeader(c.alg): v}
}

// withChecksum adds a body's checksum headers (from headers, run after
// EOF) to a write's trailer (the encryption ETag, if any).
func withChecksum(enc object.TrailerFunc, headers func() map[string]string) object.TrailerFunc {
	return func() (object.Trailer, error) {
		var tr object.Trailer
		if enc != nil {
			t, err := enc()
			if err != nil {
				return t, err
			}
			tr = t
		}
		tr.Headers = mergeHeaders(tr.Headers, headers())
		return tr, nil
	}
}
