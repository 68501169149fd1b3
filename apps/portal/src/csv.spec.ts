import { describe, expect, it } from 'vitest';
import { toCsv } from './csv';

describe('CSV export', () => {
  it('quotes cells with commas, quotes and line breaks', () => {
    expect(toCsv(['a', 'b'], [['x,y', 'say "hi"\nbye']])).toBe('a,b\r\n"x,y","say ""hi""\nbye"\r\n');
  });

  // OWASP "CSV Injection": a cell a spreadsheet may read as a formula starts with =, +, -, @, a tab or a
  // carriage return; a customer's metadata or a decline message can be any of them.
  it('never leaves a cell a spreadsheet would run as a formula', () => {
    const hostile = ['=HYPERLINK("http://x")', '+1+cmd', '-2+3', '@SUM(A1)', '\t=1+1', '\r=1+1'];
    const cells = toCsv(
      ['v'],
      hostile.map((v) => [v]),
    )
      .split('\r\n')
      .slice(1, -1);
    expect(cells).toHaveLength(hostile.length);
    for (const c of cells) expect(c.replace(/^"/, '')).toMatch(/^'/);
  });
});
