import { describe, expect, it } from 'vitest'
import { AppError } from '../../lib/errors.js'
import {
  attributeAt,
  parseValueSpec,
  resolveValueSpec,
  type ValueSpecTarget,
} from './value-spec.js'

/** The 400 message a call fails with (fails the test when it does not throw an AppError). */
function refusal(run: () => unknown): string {
  try {
    run()
  } catch (e) {
    expect(e).toBeInstanceOf(AppError)
    expect((e as AppError).statusCode).toBe(400)
    return (e as AppError).message
  }
  throw new Error('expected a 400')
}

describe('parseValueSpec', () => {
  it('accepts each of the three forms and returns only that key', () => {
    expect(parseValueSpec({ literal_value: 'a@example.com' }, 'f')).toEqual({
      literal_value: 'a@example.com',
    })
    expect(parseValueSpec({ user_attribute: 'email' }, 'f')).toEqual({ user_attribute: 'email' })
    expect(parseValueSpec({ system_field: 'username' }, 'f')).toEqual({ system_field: 'username' })
    expect(parseValueSpec({ literal_value: '' }, 'f')).toEqual({ literal_value: '' })
  })

  it.each([
    [null, 'to must be a value specifier'],
    ['a@example.com', 'to must be a value specifier'],
    [['email'], 'to must be a value specifier'],
    [{}, 'to must hold exactly one of literal_value, user_attribute or system_field'],
    [
      { literal_value: 'x', user_attribute: 'y' },
      'to must hold exactly one of literal_value, user_attribute or system_field',
    ],
    [{ attribute: 'email' }, 'to must be a value specifier'],
    [{ user_attribute: 5 }, 'to.user_attribute must be a string'],
    [{ literal_value: null }, 'to.literal_value must be a string'],
    [{ user_attribute: '' }, 'to.user_attribute must name an attribute'],
    [{ user_attribute: 'x'.repeat(256) }, 'to.user_attribute must be at most 255 characters'],
    [{ literal_value: 'x'.repeat(10_001) }, 'to.literal_value must be at most 10000 characters'],
    [{ system_field: 'id' }, 'to.system_field must be username'],
    [{ system_field: 'USERNAME' }, 'to.system_field must be username'],
  ])('refuses %j naming the field', (input, message) => {
    expect(refusal(() => parseValueSpec(input, 'to'))).toContain(message)
  })

  it('refuses a literal where literals are not allowed (recipients), and only there', () => {
    expect(
      refusal(() =>
        parseValueSpec({ literal_value: 'x@y.com' }, 'to_number', { allowLiteral: false }),
      ),
    ).toBe('to_number must not be a literal_value: use user_attribute or system_field')
    expect(
      parseValueSpec({ user_attribute: 'phone' }, 'to_number', { allowLiteral: false }),
    ).toEqual({
      user_attribute: 'phone',
    })
  })
})

describe('attributeAt', () => {
  const attributes = {
    email: 'top@example.com',
    'contact.email': 'dotted-key@example.com',
    contact: { email: 'nested@example.com', phones: ['+15550000001'] },
    profile: { contact: { email: 'deep@example.com' } },
  }

  it('prefers an exact top-level key, then follows a dotted path', () => {
    expect(attributeAt(attributes, 'email')).toBe('top@example.com')
    expect(attributeAt(attributes, 'contact.email')).toBe('dotted-key@example.com')
    expect(attributeAt(attributes, 'profile.contact.email')).toBe('deep@example.com')
    expect(attributeAt(attributes, 'contact.phones.0')).toBe('+15550000001')
  })

  it('finds nothing outside own properties or under non-objects', () => {
    expect(attributeAt(attributes, 'missing')).toBeUndefined()
    expect(attributeAt(attributes, 'email.length')).toBeUndefined()
    expect(attributeAt(attributes, 'constructor')).toBeUndefined()
    expect(attributeAt(attributes, '__proto__')).toBeUndefined()
    expect(attributeAt(attributes, 'profile.toString')).toBeUndefined()
    expect(attributeAt(attributes, 'profile..contact')).toBeUndefined()
    expect(attributeAt(null, 'email')).toBeUndefined()
    expect(attributeAt(['a'], '0')).toBeUndefined()
    expect(attributeAt('text', 'length')).toBeUndefined()
  })
})

describe('resolveValueSpec', () => {
  const user: ValueSpecTarget = {
    username: 'ada',
    attributes: { email: 'ada@example.com', age: 36, vip: false, none: null, tags: ['a'], o: {} },
  }

  it('resolves literals, attributes and the username', () => {
    expect(resolveValueSpec({ literal_value: 'hi' }, user, 'f')).toBe('hi')
    expect(resolveValueSpec({ user_attribute: 'email' }, user, 'f')).toBe('ada@example.com')
    expect(resolveValueSpec({ system_field: 'username' }, user, 'f')).toBe('ada')
  })

  it("gives '' for a missing or null attribute, and for users without attributes", () => {
    expect(resolveValueSpec({ user_attribute: 'nickname' }, user, 'f')).toBe('')
    expect(resolveValueSpec({ user_attribute: 'none' }, user, 'f')).toBe('')
    expect(
      resolveValueSpec({ user_attribute: 'email' }, { username: 'u', attributes: null }, 'f'),
    ).toBe('')
    expect(
      resolveValueSpec({ user_attribute: 'email' }, { username: 'u', attributes: {} }, 'f'),
    ).toBe('')
  })

  it('sends numbers and booleans as their JSON text', () => {
    expect(resolveValueSpec({ user_attribute: 'age' }, user, 'f')).toBe('36')
    expect(resolveValueSpec({ user_attribute: 'vip' }, user, 'f')).toBe('false')
  })

  it('refuses objects and arrays, naming the field and never the value', () => {
    for (const name of ['tags', 'o']) {
      const message = refusal(() =>
        resolveValueSpec({ user_attribute: name }, user, 'substitutions.{{x}}'),
      )
      expect(message).toBe(
        'substitutions.{{x}} names an attribute holding an object or array; only text, numbers and booleans can be sent',
      )
    }
  })
})
