import { describe, expect, it } from 'vitest'
import { AppError } from '../../lib/errors.js'
import {
  checkTemplateKeys,
  dynamicTemplateData,
  isDynamicTemplate,
  TemplateKeyClash,
  templateVariable,
} from './sendgrid-template-data.js'

describe('SendGrid template kinds', () => {
  it('treats ids starting d- as dynamic, anything else as legacy', () => {
    expect(isDynamicTemplate('d-0123456789abcdef0123456789abcdef')).toBe(true)
    expect(isDynamicTemplate('d-')).toBe(true)
    expect(isDynamicTemplate('13b8f94f-bcae-4ec6-b752-70d6cb59f932')).toBe(false)
    expect(isDynamicTemplate('D-0123')).toBe(false)
    expect(isDynamicTemplate('xd-0123')).toBe(false)
  })
})

describe('templateVariable', () => {
  it.each([
    ['{{first_name}}', ['first_name']],
    ['{{ first_name }}', ['first_name']],
    ['{{{first_name}}}', ['first_name']],
    ['first_name', ['first_name']],
    ['-age-', ['-age-']],
    ['{{user.city}}', ['user', 'city']],
    ['{name}', ['{name}']],
  ])('%s names %j', (key, path) => {
    expect(templateVariable(key)).toEqual(path)
  })
})

describe('dynamicTemplateData', () => {
  it('turns tags into variables, dotted paths into nested objects', () => {
    expect(
      dynamicTemplateData({
        '{{first_name}}': 'Ada',
        '{{ user.city }}': 'London',
        '{{user.zip}}': 'NW1',
        plain: 'x',
      }),
    ).toEqual({ first_name: 'Ada', user: { city: 'London', zip: 'NW1' }, plain: 'x' })
  })

  it('is empty for no substitutions', () => {
    expect(dynamicTemplateData({})).toEqual({})
  })

  it.each([
    [{ '{{name}}': 'a', name: 'b' }, 'name', '{{name}}'],
    [{ '{{user}}': 'a', '{{user.city}}': 'b' }, '{{user.city}}', '{{user}}'],
    [{ '{{user.city}}': 'b', '{{user}}': 'a' }, '{{user}}', '{{user.city}}'],
  ])('refuses two keys for one variable (%j)', (subs, key, other) => {
    let thrown: unknown
    try {
      dynamicTemplateData(subs)
    } catch (e) {
      thrown = e
    }
    expect(thrown).toBeInstanceOf(TemplateKeyClash)
    expect(thrown).toMatchObject({ key, other })
  })
})

describe('checkTemplateKeys', () => {
  const refusal = (run: () => void) => {
    try {
      run()
    } catch (e) {
      expect(e).toBeInstanceOf(AppError)
      expect((e as AppError).statusCode).toBe(400)
      return (e as AppError).message
    }
    throw new Error('expected a 400')
  }

  it('lets legacy templates keep any distinct keys', () => {
    expect(() => checkTemplateKeys('13b8f94f', ['{{name}}', 'name', '{{a..b}}'])).not.toThrow()
  })

  it('names the clashing key for a dynamic template', () => {
    expect(refusal(() => checkTemplateKeys('d-1', ['{{name}}', 'name']))).toBe(
      'substitutions.name names the same template variable as {{name}} (dynamic templates get dynamic_template_data)',
    )
    expect(refusal(() => checkTemplateKeys('d-1', ['{{a..b}}']))).toBe(
      'substitutions.{{a..b}} is not a template variable name for a dynamic template (empty path segment)',
    )
  })

  it('refuses a key that clashes with one Coffer fills in', () => {
    expect(
      refusal(() => checkTemplateKeys('d-1', ['reset_token'], ['{{reset_token}}', '{{user_id}}'])),
    ).toBe(
      'substitutions.reset_token names the template variable of {{reset_token}}, which Coffer fills in',
    )
    expect(() => checkTemplateKeys('13b8f94f', ['reset_token'], ['{{reset_token}}'])).not.toThrow()
  })
})
