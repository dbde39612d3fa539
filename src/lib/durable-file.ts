import {
  closeSync,
  fsyncSync,
  linkSync,
  openSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs'
import { dirname } from 'node:path'

/**
 * Writes a file crash-safely: a temp file beside it (mode 0600), fsync, rename over the target,
 * fsync of the folder. A kill at any point leaves the old file or the new one, whole.
 */
export function writeSecretFile(path: string, text: string): void {
  const temp = writeTemp(path, text)
  renameSync(temp, path)
  syncFolder(dirname(path))
}

/**
 * Like writeSecretFile, but only when no file is there yet: the temp file is hard-linked to the
 * name (atomic, fails when the name exists), so of two processes creating it at once exactly one
 * wins and the other reads the winner's. Returns false when the file already existed.
 */
export function createSecretFile(path: string, text: string): boolean {
  const temp = writeTemp(path, text)
  try {
    linkSync(temp, path)
    syncFolder(dirname(path))
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw error
  } finally {
    rmSync(temp, { force: true })
  }
}

function writeTemp(path: string, text: string): string {
  const temp = `${path}.${process.pid}.tmp`
  rmSync(temp, { force: true })
  const fd = openSync(temp, 'wx', 0o600)
  try {
    writeSync(fd, text)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  return temp
}

/** Flushes a file's content to disk (it must exist). */
export function syncFile(path: string): void {
  const fd = openSync(path, 'r+')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** Makes a rename or removal in the folder durable (a no-op where folders cannot be opened). */
export function syncFolder(folder: string): void {
  let fd: number | undefined
  try {
    fd = openSync(folder, 'r')
    fsyncSync(fd)
  } catch {
    // Some platforms refuse fsync on a directory; the rename itself is still atomic.
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}

/** Bytes overwritten per write when erasing a file. */
const ERASE_CHUNK = 1024 * 1024

/**
 * Overwrites a file's bytes with zeros in place, flushes, then removes it (and flushes the
 * folder). Best effort against reading the old bytes back from the disk: copy-on-write file
 * systems and SSD wear levelling may keep old blocks, which only encrypted storage covers.
 */
export function eraseFile(path: string): void {
  const size = statSync(path).size
  const fd = openSync(path, 'r+')
  try {
    const zeros = Buffer.alloc(Math.min(ERASE_CHUNK, Math.max(size, 1)))
    for (let at = 0; at < size; at += zeros.length) {
      writeSync(fd, zeros, 0, Math.min(zeros.length, size - at), at)
    }
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  rmSync(path, { force: true })
  syncFolder(dirname(path))
}
