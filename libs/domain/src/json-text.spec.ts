import { describe, expect, it } from 'vitest';
import { parseJson, parseJsonStrictly, scanJsonKeys } from './json-text';

describe('parseJson', () => {
  it('reads escaped keys exactly after JSON.parse has met the keys it would misread them as', () => {
    // The shapes of nodejs/node#63785: a key `\` (or `x\`) after a first key poisons the next read
    // of an escaped key at that place. Fresh first keys, so no other test shares the shape.
    JSON.parse('{"json_text_h":[],"\\\\":0}');
    JSON.parse('{"json_text_k":"a","x\\\\":"x"}');
    expect(Object.keys(parseJson('{"json_text_h":1,"\\"":2}') as object)).toEqual(['json_text_h', '"']);
    expect(Object.keys(parseJson('{"json_text_h":1,"\\u00e9":2}') as object)).toEqual(['json_text_h', 'é']);
    expect(Object.keys(parseJson('{"json_text_h":1,"\\n":2}') as object)).toEqual(['json_text_h', '\n']);
    expect(Object.keys(parseJson('{"json_text_k": "b", "x\\"": "y"}') as object)).toEqual(['json_text_k', 'x"']);
  });

  it('gives what JSON.parse gives for text without escaped keys', () => {
    for (const text of ['{"a":1.5,"b":[1e3,-0,"x\\"y"],"c":{"d":null,"e":true}}', '[]', '"\\u00e9"', '12', 'null']) {
      expect(parseJson(text)).toEqual(JSON.parse(text));
    }
  });

  it("keeps JSON.parse's rules when it reads strictly", () => {
    const v = parseJson('{"\\u0061":1,"a":2.5e1,"__proto__":{"x":1},"n":-0}') as Record<string, unknown>;
    expect(v['a']).toBe(25);
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Object.hasOwn(v, '__proto__')).toBe(true);
    expect(Object.is(v['n'], -0)).toBe(true);
    expect(parseJsonStrictly('{"a":1,"a":{"b":2}}')).toEqual({ a: { b: 2 } });
  });

  it('refuses what JSON.parse refuses', () => {
    for (const text of ['{"a":1,}', '{"\\x":1}', '', '{"a":1} x']) {
      expect(() => parseJson(text)).toThrow(SyntaxError);
    }
  });
});

describe('scanJsonKeys', () => {
  it('tells duplicate keys (compared decoded) and escaped keys apart', () => {
    expect(scanJsonKeys('{"a":"\\"","b":{"a":1}}')).toEqual({ duplicateKey: false, escapedKey: false });
    expect(scanJsonKeys('{"a":1,"\\u0062":1}')).toEqual({ duplicateKey: false, escapedKey: true });
    expect(scanJsonKeys('{"a":1,"\\u0061":1}')).toEqual({ duplicateKey: true, escapedKey: true });
    expect(scanJsonKeys('[{"a":1},{"a":1}]')).toEqual({ duplicateKey: false, escapedKey: false });
  });
});
