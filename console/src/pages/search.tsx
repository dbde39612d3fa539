import { useState } from 'preact/hooks'
import { api, base64Json, fromBase64Json } from '../api'
import {
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
interface SchemaField {
  name: string
  type: string
  index: boolean
}
interface Schema {
  id: string
  name: string
  fields: SchemaField[]
}

/** Every filter type of docs/search.md. */
export const FILTER_TYPES = [
  'eq',
  'not',
  'in',
  'not_in',
  'wildcard',
  'range',
  'geo_distance',
] as const
type FilterType = (typeof FILTER_TYPES)[number]

interface FilterRow {
  field: string
  type: FilterType
  /** eq, not, wildcard: the value; in, not_in: comma-separated values. */
  value: string
  gte: string
  lte: string
  lat: string
  long: string
  distance: string
  unit: 'km' | 'mi'
}

const EMPTY_ROW: Omit<FilterRow, 'field'> = {
  type: 'eq',
  value: '',
  gte: '',
  lte: '',
  lat: '',
  long: '',
  distance: '10',
  unit: 'km',
}

/** A typed value as the schema's field type wants it: numbers stay numbers. */
function scalar(text: string, fieldType: string | undefined): string | number | boolean {
  const t = text.trim()
  if (
    ['integer', 'long', 'float', 'double'].includes(fieldType ?? '') &&
    t !== '' &&
    !Number.isNaN(Number(t))
  )
    return Number(t)
  if (fieldType === 'boolean' && (t === 'true' || t === 'false')) return t === 'true'
  return text
}

function filterValue(row: FilterRow, fieldType: string | undefined): unknown {
  switch (row.type) {
    case 'in':
    case 'not_in':
      return row.value.split(',').map((v) => scalar(v.trim(), fieldType))
    case 'range': {
      const range: Record<string, unknown> = {}
      if (row.gte.trim()) range.gte = scalar(row.gte, fieldType)
      if (row.lte.trim()) range.lte = scalar(row.lte, fieldType)
      return range
    }
    case 'geo_distance':
      return {
        lat: Number(row.lat),
        long: Number(row.long),
        distance: Number(row.distance),
        unit: row.unit,
      }
    default:
      return scalar(row.value, fieldType)
  }
}

/** The `search_option` the builder sends (shown to the user as it is sent). */
export function searchOption(
  schema: Schema,
  rows: FilterRow[],
  filterType: 'and' | 'or',
  page: number,
  perPage: number,
): Record<string, unknown> {
  const filter: Record<string, unknown> = {}
  for (const row of rows) {
    const field = schema.fields.find((f) => f.name === row.field)
    filter[row.field] = { type: row.type, value: filterValue(row, field?.type) }
  }
  return {
    schema_id: schema.id,
    filter,
    filter_type: filterType,
    page,
    per_page: perPage,
    full_document: true,
  }
}

const SCHEMA_FIELDS = ['schema', 'name', 'fields'] as const

function Schemas({ vaultId, onChanged }: { vaultId: string; onChanged: () => void }) {
  const [text, setText] = useState(
    JSON.stringify(
      {
        name: 'people',
        fields: [
          { name: 'name', type: 'string', index: true },
          { name: 'age', type: 'integer', index: true },
          { name: 'home', type: 'geo_point', index: true },
        ],
      },
      null,
      2,
    ),
  )
  const create = useAction()
  return (
    <form
      class="card"
      aria-label="Define a schema"
      noValidate
      onSubmit={(e) => {
        e.preventDefault()
        void create.run(async () => {
          await api('POST', `/v1/vaults/${vaultId}/schemas`, {
            form: { schema: base64Json(JSON.parse(text)) },
          })
          onChanged()
        })
      }}
    >
      <h2>Define a schema</h2>
      <p class="hint">
        Field types: string, integer, long, float, double, boolean, date, geo_point (one per
        schema). Only indexed fields are searchable.
      </p>
      <JsonEditor
        label="Schema"
        name="schema"
        value={text}
        onInput={setText}
        error={errorFor(create.error, 'schema', SCHEMA_FIELDS)}
      />
      <FormError error={create.error} fields={SCHEMA_FIELDS} />
      <button type="submit" disabled={create.busy || !jsonValid(text)}>
        Create schema
      </button>
    </form>
  )
}

interface SearchAnswer {
  data: {
    documents: { document_id: string; owner_id: string | null; document?: string }[]
    info: { current_page: number; num_pages: number; total_result_count: number }
  }
}

function FilterEditor(p: {
  row: FilterRow
  index: number
  fields: SchemaField[]
  onChange: (row: FilterRow) => void
  onRemove: () => void
}) {
  const { row } = p
  const set = (patch: Partial<FilterRow>) => p.onChange({ ...row, ...patch })
  const n = p.index + 1
  return (
    <fieldset class="filter">
      <legend>Filter {n}</legend>
      <SelectField
        label={`Field of filter ${n}`}
        name={`field-${n}`}
        value={row.field}
        options={p.fields.map((f) => [f.name, `${f.name} (${f.type})`] as [string, string])}
        onChange={(field) => set({ field })}
      />
      <SelectField
        label={`Type of filter ${n}`}
        name={`type-${n}`}
        value={row.type}
        options={FILTER_TYPES}
        onChange={(type) => set({ type: type as FilterType })}
      />
      {(row.type === 'eq' || row.type === 'not' || row.type === 'wildcard') && (
        <TextField
          label={`Value of filter ${n}`}
          name={`value-${n}`}
          value={row.value}
          onInput={(value) => set({ value })}
          hint={row.type === 'wildcard' ? '* any characters, ? one character' : undefined}
        />
      )}
      {(row.type === 'in' || row.type === 'not_in') && (
        <TextField
          label={`Values of filter ${n} (comma-separated)`}
          name={`value-${n}`}
          value={row.value}
          onInput={(value) => set({ value })}
        />
      )}
      {row.type === 'range' && (
        <>
          <TextField
            label={`From (gte) of filter ${n}`}
            name={`gte-${n}`}
            value={row.gte}
            onInput={(gte) => set({ gte })}
          />
          <TextField
            label={`To (lte) of filter ${n}`}
            name={`lte-${n}`}
            value={row.lte}
            onInput={(lte) => set({ lte })}
          />
        </>
      )}
      {row.type === 'geo_distance' && (
        <>
          <TextField
            label={`Latitude of filter ${n}`}
            name={`lat-${n}`}
            value={row.lat}
            onInput={(lat) => set({ lat })}
          />
          <TextField
            label={`Longitude of filter ${n}`}
            name={`long-${n}`}
            value={row.long}
            onInput={(long) => set({ long })}
          />
          <TextField
            label={`Distance of filter ${n}`}
            name={`distance-${n}`}
            value={row.distance}
            onInput={(distance) => set({ distance })}
          />
          <SelectField
            label={`Unit of filter ${n}`}
            name={`unit-${n}`}
            value={row.unit}
            options={['km', 'mi']}
            onChange={(unit) => set({ unit: unit as 'km' | 'mi' })}
          />
        </>
      )}
      <button type="button" onClick={p.onRemove}>
        Remove filter {n}
      </button>
    </fieldset>
  )
}

function Builder({ vaultId, schema }: { vaultId: string; schema: Schema }) {
  const indexed = schema.fields.filter((f) => f.index)
  const [rows, setRows] = useState<FilterRow[]>([{ field: indexed[0]?.name ?? '', ...EMPTY_ROW }])
  const [filterType, setFilterType] = useState<'and' | 'or'>('and')
  const [perPage, setPerPage] = useState('20')
  const [answer, setAnswer] = useState<SearchAnswer['data'] | null>(null)
  const [sent, setSent] = useState<Record<string, unknown> | null>(null)
  const { busy, error, run } = useAction()
  const go = (page: number) => {
    const option = searchOption(schema, rows, filterType, page, Number(perPage) || 20)
    setSent(option)
    void run(async () => {
      const res = await api<SearchAnswer>('POST', `/v1/vaults/${vaultId}/search`, {
        form: { search_option: base64Json(option) },
      })
      setAnswer(res.data)
    })
  }
  return (
    <form
      class="card"
      aria-label="Search builder"
      noValidate
      onSubmit={(e) => {
        e.preventDefault()
        go(1)
      }}
    >
      <h2>Search {schema.name}</h2>
      {rows.map((row, i) => (
        <FilterEditor
          key={i}
          row={row}
          index={i}
          fields={indexed}
          onChange={(r) => setRows(rows.map((old, j) => (j === i ? r : old)))}
          onRemove={() => setRows(rows.filter((_, j) => j !== i))}
        />
      ))}
      <button
        type="button"
        onClick={() => setRows([...rows, { field: indexed[0]?.name ?? '', ...EMPTY_ROW }])}
      >
        Add filter
      </button>
      <SelectField
        label="Combine filters with"
        name="filter_type"
        value={filterType}
        options={[
          ['and', 'and (every filter)'],
          ['or', 'or (any filter)'],
        ]}
        onChange={(v) => setFilterType(v as 'and' | 'or')}
      />
      <TextField label="Per page" name="per_page" value={perPage} onInput={setPerPage} />
      <FormError error={error} />
      <button type="submit" disabled={busy || rows.length === 0}>
        Search
      </button>
      {sent && (
        <>
          <h3>search_option sent</h3>
          <pre class="json" data-testid="search-option">
            {JSON.stringify(sent, null, 2)}
          </pre>
        </>
      )}
      {answer && (
        <>
          <h3>Results ({answer.info.total_result_count})</h3>
          <table aria-label="Search results">
            <thead>
              <tr>
                <th scope="col">Document</th>
                <th scope="col">Content</th>
              </tr>
            </thead>
            <tbody>
              {answer.documents.map((d) => (
                <tr key={d.document_id}>
                  <td>
                    <code>{d.document_id}</code>
                  </td>
                  <td>
                    <code>{d.document ? JSON.stringify(fromBase64Json(d.document)) : ''}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <Pager
            label="Results"
            page={answer.info.current_page}
            hasNext={answer.info.current_page < answer.info.num_pages}
            total={answer.info.total_result_count}
            onPage={go}
          />
        </>
      )}
    </form>
  )
}

export function SearchPage() {
  const vaults = useLoad(
    () => api<{ vaults: Vault[] }>('GET', '/v1/vaults', { query: { per_page: 500 } }),
    [],
  )
  const [vaultId, setVaultId] = useState('')
  const chosen = vaultId || vaults.data?.vaults[0]?.id || ''
  const schemas = useLoad(
    () =>
      chosen
        ? api<{ schemas: Schema[] }>('GET', `/v1/vaults/${chosen}/schemas`)
        : Promise.resolve({ schemas: [] }),
    [chosen],
  )
  const [schemaId, setSchemaId] = useState('')
  const list = schemas.data?.schemas ?? []
  const schema = list.find((s) => s.id === schemaId) ?? list[0]
  return (
    <Page title="Schemas & search">
      <Loading loaded={vaults} />
      <SelectField
        label="Vault"
        name="vault"
        value={chosen}
        options={(vaults.data?.vaults ?? []).map((v) => [v.id, v.name] as [string, string])}
        onChange={(v) => {
          setVaultId(v)
          setSchemaId('')
        }}
      />
      {chosen && (
        <>
          <Loading loaded={schemas} />
          {list.length > 0 && (
            <SelectField
              label="Schema"
              name="schema"
              value={schema?.id ?? ''}
              options={list.map(
                (s) =>
                  [
                    s.id,
                    `${s.name}: ${s.fields.map((f) => `${f.name} ${f.type}${f.index ? '' : ' (not indexed)'}`).join(', ')}`,
                  ] as [string, string],
              )}
              onChange={setSchemaId}
            />
          )}
          {schema && (
            <p>
              Schema id <code>{schema.id}</code>
            </p>
          )}
          {schema && <Builder key={`${chosen}:${schema.id}`} vaultId={chosen} schema={schema} />}
          <Schemas vaultId={chosen} onChanged={schemas.reload} />
        </>
      )}
    </Page>
  )
}
