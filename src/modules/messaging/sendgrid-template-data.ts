import { errors } from '../../lib/errors.js'

/**
 * SendGrid has two kinds of templates. Legacy ones take `substitutions`: tags replaced as
 * written (`{{name}}`, `-name-`). Dynamic ones (ids `d-…`) are Handlebars and take
 * `dynamic_template_data` instead; SendGrid refuses `substitutions` for them. Coffer's callers
 * write substitutions one way for both (keys as the template spells the tag), so for a dynamic
 * template each key becomes the Handlebars variable it names: `{{first_name}}` (or `{{{…}}}`,
 * `{{ … }}`) is `first_name`, a dotted path `{{user.city}}` a nested object, a key without braces
 * is the variable itself.
 */
export function isDynamicTemplate(templateId: string): boolean {
  return templateId.startsWith('d-')
}

const BRACED = /^\{\{\{?\s*(.*?)\s*\}?\}\}$/s

/** The Handlebars variable path a substitution key names, segment by segment. */
export function templateVariable(key: string): string[] {
  const inner = BRACED.exec(key)?.[1] ?? key
  return inner.split('.')
}

type TemplateData = { [name: string]: string | TemplateData }

/** Thrown when two keys name the same variable, or one names a part of another. */
export class TemplateKeyClash extends Error {
  constructor(
    readonly key: string,
    readonly other: string,
  ) {
    super(`${key} and ${other} name the same template variable`)
  }
}

/** `dynamic_template_data` for the substitutions (keys as written → text). */
export function dynamicTemplateData(substitutions: Record<string, string>): TemplateData {
  const data: TemplateData = Object.create(null)
  // Which key set each path (leaf or branch), to name both keys of a clash.
  const owners = new Map<string, string>()
  for (const [key, value] of Object.entries(substitutions)) {
    const path = templateVariable(key)
    if (path.some((segment) => segment === '')) throw new TemplateKeyClash(key, key)
    let node = data
    for (const [i, segment] of path.entries()) {
      const at = path.slice(0, i + 1).join('.')
      const existing = node[segment]
      const last = i === path.length - 1
      if (existing !== undefined && (last || typeof existing === 'string'))
        throw new TemplateKeyClash(key, owners.get(at) ?? at)
      owners.set(at, owners.get(at) ?? key)
      if (last) {
        node[segment] = value
      } else {
        const branch: TemplateData = (existing as TemplateData | undefined) ?? Object.create(null)
        node[segment] = branch
        node = branch
      }
    }
  }
  return data
}

/**
 * Refuses, with a 400 naming the key, substitutions a dynamic template could not receive: two
 * keys for one variable, or an empty path segment (`{{a..b}}`). `reserved`: keys Coffer adds
 * itself (password reset tags), which the caller's keys must not clash with either.
 */
export function checkTemplateKeys(
  templateId: string,
  keys: readonly string[],
  reserved: readonly string[] = [],
): void {
  if (!isDynamicTemplate(templateId)) return
  const all = [...reserved, ...keys]
  try {
    dynamicTemplateData(Object.fromEntries(all.map((k) => [k, ''])))
  } catch (e) {
    if (!(e instanceof TemplateKeyClash)) throw e
    const problem =
      e.key === e.other
        ? 'is not a template variable name for a dynamic template (empty path segment)'
        : reserved.includes(e.other)
          ? `names the template variable of ${e.other}, which Coffer fills in`
          : `names the same template variable as ${e.other} (dynamic templates get dynamic_template_data)`
    throw errors.invalidField(`substitutions.${e.key}`, problem)
  }
}
