import { createRequire } from 'node:module'
import type * as Sdk from '@aws-sdk/client-s3'

/**
 * The parts of the AWS SDK the S3 store uses, loaded on first use (issue 21, idle RSS).
 *
 * Importing `@aws-sdk/client-s3` costs ~25 MB resident; a node on the file store never needs it,
 * yet any static import of s3-blob-store.ts (the backup module has one, for backups to S3) loaded
 * it at start. Each class here is a stand-in that loads the SDK (synchronously, its CommonJS
 * build) when it is first constructed, and returns the SDK's own instance: `new X(...)` from the
 * stand-in is the SDK's object (its constructor, name and prototype are the SDK's), so nothing
 * downstream can tell. Only construction is forwarded: no static member of these classes is used.
 */
const require = createRequire(import.meta.url)
let loaded: typeof Sdk | undefined

/** The SDK module itself, loaded on the first call. */
export function s3Sdk(): typeof Sdk {
  loaded ??= require('@aws-sdk/client-s3') as typeof Sdk
  return loaded
}

type ClassName =
  | 'AbortMultipartUploadCommand'
  | 'CompleteMultipartUploadCommand'
  | 'CreateMultipartUploadCommand'
  | 'DeleteObjectCommand'
  | 'GetObjectCommand'
  | 'HeadBucketCommand'
  | 'HeadObjectCommand'
  | 'ListObjectsV2Command'
  | 'PutObjectCommand'
  | 'S3Client'
  | 'UploadPartCommand'

function onFirstUse<N extends ClassName>(name: N): (typeof Sdk)[N] {
  // A function target: `construct` traps need a constructible one.
  const target = function standIn() {} as unknown as (typeof Sdk)[N]
  return new Proxy(target, {
    construct(_target, args) {
      const Real = s3Sdk()[name] as unknown as new (...a: unknown[]) => object
      return new Real(...args)
    },
  })
}

export const AbortMultipartUploadCommand = onFirstUse('AbortMultipartUploadCommand')
export const CompleteMultipartUploadCommand = onFirstUse('CompleteMultipartUploadCommand')
export const CreateMultipartUploadCommand = onFirstUse('CreateMultipartUploadCommand')
export const DeleteObjectCommand = onFirstUse('DeleteObjectCommand')
export const GetObjectCommand = onFirstUse('GetObjectCommand')
export const HeadBucketCommand = onFirstUse('HeadBucketCommand')
export const HeadObjectCommand = onFirstUse('HeadObjectCommand')
export const ListObjectsV2Command = onFirstUse('ListObjectsV2Command')
export const PutObjectCommand = onFirstUse('PutObjectCommand')
export const S3Client = onFirstUse('S3Client')
export const UploadPartCommand = onFirstUse('UploadPartCommand')
export type S3Client = Sdk.S3Client
export type {
  CreateMultipartUploadCommandOutput,
  GetObjectCommandOutput,
  ListObjectsV2CommandOutput,
  UploadPartCommandOutput,
} from '@aws-sdk/client-s3'
