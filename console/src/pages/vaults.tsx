import { useState } from 'preact/hooks'
import { api, authorization, checked, errorOf } from '../api'
import { BASE, navigate } from '../router'
import { session } from '../session'
import {
  confirmed,
  errorFor,
  FormError,
  JsonEditor,
  jsonValid,
  Loading,
  Page,
  Pager,
  SelectField,
  TextField,
  useAction,
  useLoad,
} from '../ui'

interface Vault {
  id: string
  name: string
}

const PER_PAGE = 20
/** The server's bound on a BLOB (spec: 50 MB); larger files are refused before upload. */
export const MAX_BLOB_BYTES = 50 * 1024 * 1024

export function VaultsPage() {
  const [page, setPage] = useState(1)
  const vaults = useLoad(
    () => api<{ vaults: Vault[] }>('GET', '/v1/vaults', { query: { page, per_page: PER_PAGE } }),
    [page],
  )
  const [name, setName] = useState('')
  const create = useAction()
  const list = vaults.data?.vaults ?? []
  return (
    <Page title="Vaults">
      <Loading loaded={vaults} />
      <ul class="list" aria-label="Vaults">
        {list.map((v) => (
          <li key={v.id}>
            <a
              href={`${BASE}/vaults/${v.id}`}
              onClick={(e) => {
                e.preventDefault()
                navigate(`/vaults/${v.id}`)
              }}
            >
              {v.name}
            </a>{' '}
            <code>{v.id}</code>
          </li>
        ))}
      </ul>
      <Pager label="Vaults" page={page} hasNext={list.length === PER_PAGE} onPage={setPage} />
      <form
        class="card"
        aria-label="Create a vault"
        noValidate
        onSubmit={(e) => {
          e.preventDefault()
          void create.run(async () => {
            const answer = await api<{ vault: Vault }>('POST', '/v1/vaults', { form: { name } })
            navigate(`/vaults/${answer.vault.id}`)
          })
        }}
      >
        <h2>Create a vault</h2>
        <TextField
          label="Name"
          name="name"
          value={name}
          onInput={setName}
          required
          error={errorFor(create.error, 'name', ['name'])}
        />
        <FormError error={create.error} fields={['name']} />
        <button type="submit" disabled={create.busy}>
          Create vault
        </button>
      </form>
    </Page>
  )
}

export function VaultPage({ id }: { id: string }) {
  const vault = useLoad(() => api<{ vault: Vault }>('GET', `/v1/vaults/${id}`), [id])
  const remove = useAction()
  const v = vault.data?.vault
  return (
    <Page title={v ? `Vault ${v.name}` : 'Vault'}>
      <Loading loaded={vault} />
      {v && (
        <>
          <p>
            Id <code>{v.id}</code>
          </p>
          <Documents vaultId={v.id} />
          <Blobs vaultId={v.id} />
          <div class="card">
            <button
              type="button"
              class="danger"
              disabled={remove.busy}
              onClick={() => {
                if (!confirmed(`Delete vault ${v.name}? Only an empty vault can be deleted.`))
                  return
                void remove.run(async () => {
                  await api('DELETE', `/v1/vaults/${v.id}`)
                  navigate('/vaults')
                })
              }}
            >
              Delete vault
            </button>
            <FormError error={remove.error} />
          </div>
        </>
      )}
    </Page>
  )
}

interface Item {
  id: string
  owner_id: string | null
  schema_id?: string | null
}
interface ItemPage<T> {
  data: { items: T[]; page: number; per_page: number; total: number }
}

const DOC_FIELDS = ['document', 'owner_id', 'schema_id'] as const

function Documents({ vaultId }: { vaultId: string }) {
  const [page, setPage] = useState(1)
  const [open, setOpen] = useState<string | null>(null)
  const docs = useLoad(
    () =>
      api<ItemPage<Item>>('GET', `/v1/vaults/${vaultId}/documents`, {
        query: { page, per_page: PER_PAGE },
      }),
    [vaultId, page],
  )
  const [text, setText] = useState('{\n  "name": "example"\n}')
  const [schemaId, setSchemaId] = useState('')
  const create = useAction()
  const d = docs.data?.data
  return (
    <section class="card" aria-labelledby="documents-heading">
      <h2 id="documents-heading">Documents</h2>
      <Loading loaded={docs} />
      <ul class="list" aria-label="Documents">
        {(d?.items ?? []).map((item) => (
          <li key={item.id}>
            <button type="button" class="link" onClick={() => setOpen(item.id)}>
              <code>{item.id}</code>
            </button>{' '}
            owner {item.owner_id ? <code>{item.owner_id}</code> : 'none'}
          </li>
        ))}
      </ul>
      <Pager
        label="Documents"
        page={page}
        hasNext={d ? page * d.per_page < d.total : false}
        total={d?.total}
        onPage={setPage}
      />
      {open && (
        <DocumentEditor
          key={open}
          vaultId={vaultId}
          documentId={open}
          onChanged={docs.reload}
          onClose={() => setOpen(null)}
        />
      )}
      <form
        noValidate
        aria-label="Create a document"
        onSubmit={(e) => {
          e.preventDefault()
          void create.run(async () => {
            const answer = await api<{ document_id: string }>(
              'POST',
              `/v2/vaults/${vaultId}/documents`,
              {
                json: {
                  document: JSON.parse(text),
                  ...(schemaId.trim() ? { schema_id: schemaId.trim() } : {}),
                },
              },
            )
            setOpen(answer.document_id)
            docs.reload()
          })
        }}
      >
        <h3>Create a document</h3>
        <JsonEditor
          label="New document"
          name="document"
          value={text}
          onInput={setText}
          rows={4}
          error={errorFor(create.error, 'document', DOC_FIELDS)}
        />
        <TextField
          label="Schema id (optional: makes the document searchable under that schema)"
          name="schema_id"
          value={schemaId}
          onInput={setSchemaId}
          error={errorFor(create.error, 'schema_id', DOC_FIELDS)}
        />
        <FormError error={create.error} fields={DOC_FIELDS} />
        <button type="submit" disabled={create.busy || !jsonValid(text)}>
          Create document
        </button>
      </form>
    </section>
  )
}

interface FullDocument {
  id: string
  owner_id: string | null
  document: unknown
}

function DocumentEditor(p: {
  vaultId: string
  documentId: string
  onChanged: () => void
  onClose: () => void
}) {
  const base = `/v2/vaults/${p.vaultId}/documents/${p.documentId}`
  const doc = useLoad(() => api<{ documents: FullDocument[] }>('GET', base), [base])
  const found = doc.data?.documents[0]
  return (
    <section class="card inner" aria-label={`Document ${p.documentId}`}>
      <h3>
        Document <code>{p.documentId}</code>
      </h3>
      <Loading loaded={doc} />
      {found && <DocumentForms {...p} found={found} reload={doc.reload} />}
      <button type="button" onClick={p.onClose}>
        Close
      </button>
    </section>
  )
}

function DocumentForms(p: {
  vaultId: string
  documentId: string
  found: FullDocument
  onChanged: () => void
  onClose: () => void
  reload: () => void
}) {
  const [text, setText] = useState(JSON.stringify(p.found.document, null, 2))
  const [owner, setOwner] = useState(p.found.owner_id ?? '')
  const [saved, setSaved] = useState('')
  const save = useAction()
  const own = useAction()
  const remove = useAction()
  return (
    <>
      <form
        noValidate
        aria-label="Edit the document"
        onSubmit={(e) => {
          e.preventDefault()
          setSaved('')
          void save.run(async () => {
            await api('PUT', `/v2/vaults/${p.vaultId}/documents/${p.documentId}`, {
              json: { document: JSON.parse(text) },
            })
            setSaved('Document saved.')
            p.reload()
          })
        }}
      >
        <JsonEditor
          label="Content"
          name="document"
          value={text}
          onInput={setText}
          error={errorFor(save.error, 'document', DOC_FIELDS)}
        />
        <FormError error={save.error} fields={DOC_FIELDS} />
        <button type="submit" disabled={save.busy || !jsonValid(text)}>
          Save document
        </button>
        {saved && <p role="status">{saved}</p>}
      </form>
      <form
        noValidate
        aria-label="Change the document's owner"
        onSubmit={(e) => {
          e.preventDefault()
          void own.run(async () => {
            await api('PUT', `/v1/vaults/${p.vaultId}/documents/${p.documentId}/owner`, {
              form: { owner_id: owner.trim() },
            })
            p.onChanged()
            p.reload()
          })
        }}
      >
        <TextField
          label="Owner user id (empty: no owner)"
          name="owner_id"
          value={owner}
          onInput={setOwner}
          error={errorFor(own.error, 'owner_id', DOC_FIELDS)}
        />
        <FormError error={own.error} fields={DOC_FIELDS} />
        <button type="submit" disabled={own.busy}>
          Change owner
        </button>
      </form>
      <button
        type="button"
        class="danger"
        disabled={remove.busy}
        onClick={() => {
          if (!confirmed('Delete this document? This cannot be undone.')) return
          void remove.run(async () => {
            await api('DELETE', `/v1/vaults/${p.vaultId}/documents/${p.documentId}`)
            p.onChanged()
            p.onClose()
          })
        }}
      >
        Delete document
      </button>
      <FormError error={remove.error} />
    </>
  )
}

interface Blob {
  id: string
  filename: string
  size: string
  mime_type: string
  owner_id: string | null
}

/** XMLHttpRequest, not fetch: only it reports upload progress. */
function upload(
  vaultId: string,
  file: File,
  onProgress: (fraction: number) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open('POST', `/v1/vaults/${vaultId}/blobs`)
    xhr.setRequestHeader('authorization', authorization(session.get()?.token ?? ''))
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) onProgress(e.loaded / e.total)
    }
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        resolve()
        return
      }
      let body: unknown = null
      try {
        body = JSON.parse(xhr.responseText)
      } catch {
        body = null
      }
      reject(checked(errorOf(xhr.status, body)))
    }
    xhr.onerror = () => reject(new Error('The upload could not reach the server'))
    const form = new FormData()
    form.append('file', file, file.name)
    xhr.send(form)
  })
}

async function download(vaultId: string, blob: Blob): Promise<void> {
  const response = await fetch(`/v1/vaults/${vaultId}/blobs/${blob.id}`, {
    headers: { authorization: authorization(session.get()?.token ?? '') },
    credentials: 'omit',
  })
  if (!response.ok) {
    let body: unknown = null
    try {
      body = await response.json()
    } catch {
      body = null
    }
    throw checked(errorOf(response.status, body))
  }
  const url = URL.createObjectURL(await response.blob())
  const a = document.createElement('a')
  a.href = url
  a.download = blob.filename || blob.id
  document.body.append(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}

function Blobs({ vaultId }: { vaultId: string }) {
  const [page, setPage] = useState(1)
  const blobs = useLoad(
    () =>
      api<ItemPage<Blob>>('GET', `/v1/vaults/${vaultId}/blobs`, {
        query: { page, per_page: PER_PAGE },
      }),
    [vaultId, page],
  )
  const [file, setFile] = useState<File | null>(null)
  const [progress, setProgress] = useState<number | null>(null)
  const [ownedBlob, setOwnedBlob] = useState('')
  const [blobOwner, setBlobOwner] = useState('')
  const send = useAction()
  const act = useAction()
  const own = useAction()
  const d = blobs.data?.data
  const tooLarge = file !== null && file.size > MAX_BLOB_BYTES
  return (
    <section class="card" aria-labelledby="blobs-heading">
      <h2 id="blobs-heading">BLOBs</h2>
      <Loading loaded={blobs} />
      <table>
        <caption class="visually-hidden">BLOBs</caption>
        <thead>
          <tr>
            <th scope="col">File</th>
            <th scope="col">Size</th>
            <th scope="col">Type</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {(d?.items ?? []).map((b) => (
            <tr key={b.id}>
              <td>{b.filename}</td>
              <td>{b.size} B</td>
              <td>{b.mime_type}</td>
              <td>
                <button
                  type="button"
                  aria-label={`Download ${b.filename}`}
                  onClick={() => void act.run(() => download(vaultId, b))}
                >
                  Download
                </button>{' '}
                <button
                  type="button"
                  class="danger"
                  aria-label={`Delete ${b.filename}`}
                  onClick={() => {
                    if (!confirmed(`Delete ${b.filename}? This cannot be undone.`)) return
                    void act.run(async () => {
                      await api('DELETE', `/v1/vaults/${vaultId}/blobs/${b.id}`)
                      blobs.reload()
                    })
                  }}
                >
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <FormError error={act.error} />
      <Pager
        label="BLOBs"
        page={page}
        hasNext={d ? page * d.per_page < d.total : false}
        total={d?.total}
        onPage={setPage}
      />
      {(d?.items.length ?? 0) > 0 && (
        <form
          noValidate
          aria-label="Change a BLOB's owner"
          onSubmit={(e) => {
            e.preventDefault()
            const blobId = ownedBlob || d?.items[0]?.id
            if (!blobId) return
            void own.run(async () => {
              await api('PUT', `/v1/vaults/${vaultId}/blobs/${blobId}/owner`, {
                form: { owner_id: blobOwner.trim() },
              })
              blobs.reload()
            })
          }}
        >
          <h3>Change a BLOB's owner</h3>
          <SelectField
            label="BLOB"
            name="blob"
            value={ownedBlob || d?.items[0]?.id || ''}
            options={(d?.items ?? []).map(
              (b) => [b.id, `${b.filename} (owner ${b.owner_id ?? 'none'})`] as [string, string],
            )}
            onChange={setOwnedBlob}
          />
          <TextField
            label="New owner user id (empty: no owner)"
            name="owner_id"
            value={blobOwner}
            onInput={setBlobOwner}
            error={errorFor(own.error, 'owner_id', ['owner_id'])}
          />
          <FormError error={own.error} fields={['owner_id']} />
          <button type="submit" disabled={own.busy}>
            Change BLOB owner
          </button>
        </form>
      )}
      <form
        noValidate
        aria-label="Upload a BLOB"
        onSubmit={(e) => {
          e.preventDefault()
          if (!file || tooLarge) return
          setProgress(0)
          void send.run(async () => {
            try {
              await upload(vaultId, file, setProgress)
              blobs.reload()
            } finally {
              setProgress(null)
            }
          })
        }}
      >
        <h3>Upload a BLOB</h3>
        <div class="field">
          <label for="blob-file">File (at most 50 MB)</label>
          <input
            id="blob-file"
            name="file"
            type="file"
            aria-invalid={tooLarge ? 'true' : undefined}
            onChange={(e) => setFile((e.target as HTMLInputElement).files?.[0] ?? null)}
          />
          {tooLarge && (
            <p class="field-error" role="alert">
              file is larger than 50 MB, the server's limit
            </p>
          )}
        </div>
        {progress !== null && (
          <progress
            max={1}
            value={progress}
            aria-label="Upload progress"
          >{`${Math.round(progress * 100)}%`}</progress>
        )}
        <FormError error={send.error} fields={['file']} />
        <button type="submit" disabled={send.busy || !file || tooLarge}>
          Upload
        </button>
      </form>
    </section>
  )
}
