package s3

import (
	"errors"
	"io/fs"
	"net/http"

	"github.com/minio/minio-go/v7"

	"github.com/spangledb/spangle/node/source"
)

var (
	// ErrURL is returned for a source URL that is not s3://<bucket>[/<prefix>].
	ErrURL = errors.New("s3: bad source URL")
	// ErrConfig is returned by Config.Validate and New for a bad setting.
	ErrConfig = errors.New("s3: invalid config")
	// ErrSymlink marks a version whose _SYMLINK cannot be followed: it names
	// an invalid version, its own version, another symlink, or a version
	// that does not exist. Such errors also wrap source.ErrPermanent.
	ErrSymlink = errors.New("s3: bad _SYMLINK")
)

// permanentError marks err as one retrying cannot fix: errors.Is finds
// source.ErrPermanent in it, and its message is err's.
type permanentError struct{ err error }

func (e permanentError) Error() string   { return e.err.Error() }
func (e permanentError) Unwrap() []error { return []error{e.err, source.ErrPermanent} }

// Is makes a missing object fs.ErrNotExist, as for the other sources: a
// delta's optional files (_BASE, _DIGEST) are told absent by it.
func (e permanentError) Is(target error) bool {
	var resp minio.ErrorResponse
	return target == fs.ErrNotExist && errors.As(e.err, &resp) && resp.Code == minio.NoSuchKey
}

// classify wraps source.ErrPermanent around errors of the S3 API that
// retrying cannot fix; network errors and the throttling and server
// errors S3 asks clients to retry are returned as they are.
func classify(err error) error {
	var resp minio.ErrorResponse
	if err == nil || !errors.As(err, &resp) || !permanent(resp) {
		return err
	}
	return permanentError{err}
}

// retryableCodes are the S3 error codes worth retrying, whatever their
// HTTP status (some come as 400 or 403).
var retryableCodes = map[string]bool{
	"RequestTimeout": true, "RequestTimeTooSkewed": true, "ExpiredToken": true,
	"ExpiredTokenException": true, "TokenRefreshRequired": true, "Throttling": true,
	"ThrottlingException": true, "RequestLimitExceeded": true, "RequestThrottled": true,
	"SlowDown": true, "SlowDownRead": true, "SlowDownWrite": true,
	"InternalError": true, "ServiceUnavailable": true,
}

// permanentCodes are S3 error codes that never go away by themselves,
// including minio-go's own validation errors, which carry no status.
var permanentCodes = map[string]bool{
	minio.NoSuchKey: true, minio.NoSuchBucket: true, minio.AccessDenied: true,
	"InvalidAccessKeyId": true, "SignatureDoesNotMatch": true, "AllAccessDisabled": true,
	"AccountProblem": true, "InvalidObjectState": true, minio.InvalidBucketName: true,
	minio.XMinioInvalidObjectName: true, "InvalidArgument": true,
}

// permanent reports whether an S3 error answer will not change on retry:
// a known permanent code, or a 4xx status other than timeouts and
// throttling.
func permanent(resp minio.ErrorResponse) bool {
	if retryableCodes[resp.Code] {
		return false
	}
	if permanentCodes[resp.Code] {
		return true
	}
	s := resp.StatusCode
	return s >= 400 && s < 500 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests && s != 499
}
