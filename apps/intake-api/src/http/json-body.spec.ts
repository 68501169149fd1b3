import { describe, expect, it } from 'vitest';
import { hasDuplicateKey } from './json-body';

describe('hasDuplicateKey', () => {
  it.each([
    ['{"a":1,"a":2}', true],
    ['{"a":{"b":1,"b":1}}', true],
    ['[{"x":1},{"x":1,"y":[1,{"z":1,"z":2}]}]', true],
    ['{"plan":"a","\\u0070lan":"b"}', true],
    ['{"a\\"b":1,"a\\"b":2}', true],
    ['{"a":1,"b":{"a":1},"c":[{"a":1},{"a":1}]}', false],
    ['{"a":"a","b":"a","c":["a","a"]}', false],
    ['{"k":"{\\"k\\":1,\\"k\\":2}"}', false],
    ['{}', false],
    ['[]', false],
    ['"a"', false],
    ['{"a":[],"b":{},"c":"}"}', false],
  ])('%s -> %s', (text, expected) => {
    JSON.parse(text);
    expect(hasDuplicateKey(text)).toBe(expected);
  });
});
