#!/bin/sh
# One-shot job of compose.yaml: creates Coffer's bucket and a MinIO user for Coffer whose policy
# allows that bucket only (objects: put, get, delete, multipart; bucket: HeadBucket for /readyz).
# Safe to run again: every step is idempotent.
set -eu

until mc alias set local http://minio:9000 "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD" >/dev/null 2>&1; do
  echo "waiting for minio..."
  sleep 1
done

mc mb --ignore-existing "local/$BUCKET"

policy=/tmp/coffer-policy.json
cat >"$policy" <<JSON
{
  "Version": "2012-10-17",
  "Statement": [
    {
      "Effect": "Allow",
      "Action": ["s3:ListBucket", "s3:ListBucketMultipartUploads"],
      "Resource": ["arn:aws:s3:::$BUCKET"]
    },
    {
      "Effect": "Allow",
      "Action": [
        "s3:GetObject",
        "s3:PutObject",
        "s3:DeleteObject",
        "s3:AbortMultipartUpload",
        "s3:ListMultipartUploadParts"
      ],
      "Resource": ["arn:aws:s3:::$BUCKET/*"]
    }
  ]
}
JSON

mc admin user add local "$ACCESS_KEY_ID" "$SECRET_ACCESS_KEY"
mc admin policy create local coffer "$policy"
# Attaching a policy that is already attached fails; that is fine on a re-run.
mc admin policy attach local coffer --user "$ACCESS_KEY_ID" || true
echo "bucket $BUCKET ready for user $ACCESS_KEY_ID"
