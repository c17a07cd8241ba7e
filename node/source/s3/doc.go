// Package s3 is the S3 source of versions ("s3://<bucket>/<prefix>"),
// over any S3-compatible endpoint (AWS S3, MinIO, Ceph RGW, R2, GCS's XML
// API…) through minio-go.
//
// Under the prefix, objects are named "<db>/<version>/<file>", the layout of
// a local source root: db and version names must be valid (source.ValidName;
// others are ignored), files starting with "_" or "." are not data, and with
// require_success_file a version is visible only once its "_SUCCESS" object
// exists. Listings are delimited ("/") ListObjectsV2 calls, paginated
// (Config.ListPageSize keys a page), so a listing reads one level, never the
// whole bucket.
//
// A version holding "_SYMLINK" is a symlink, as in sequins: the object's
// content, whitespace-trimmed, names another version of the same db, whose
// files ListFiles and Open return. It exists to make nodes fetch a version
// again under a new, greater name without copying its data. With
// require_success_file a symlinked version is complete when its target
// holds "_SUCCESS". A symlink naming an invalid version, itself, another
// symlink (chains are not followed) or a version that does not exist fails
// that version only, with an error wrapping ErrSymlink.
//
// Source implements source.Source and source.RangeSource (OpenAt reads from an
// offset with an HTTP Range request, so a download that fails mid-file
// resumes) and is injected through node.Config.OpenedSource. Errors that
// retrying cannot fix (NoSuchKey, NoSuchBucket, AccessDenied and other 4xx
// answers) wrap source.ErrPermanent; network errors and 5xx answers do not.
//
// Credentials, first found wins: the static keys of Config; the environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, then
// MINIO_ROOT_USER and MINIO_ROOT_PASSWORD, or MINIO_ACCESS_KEY and
// MINIO_SECRET_KEY); the shared AWS files (~/.aws/config and
// ~/.aws/credentials, AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE); IAM (EC2
// instance role, ECS task role, EKS web identity).
//
// # Caveats
//
//   - With require_success_file, every listing of a db's versions checks the
//     marker files of each version not yet known complete (one small list
//     request per version, a few at a time); complete versions and
//     symlink targets are remembered, since versions are immutable.
//   - A _SYMLINK is read once: changing its content later is not seen until
//     the version disappears from a listing.
//   - Without any credentials, requests go unsigned (public buckets), but
//     minio-go probes the credential chain, IAM metadata included, again
//     before each request: give keys, or expect slow requests off AWS.
//   - Objects stored with a Content-Encoding are read as stored (no
//     decompression).
package s3
