import { parseJson } from '@retain/domain';
import { types } from 'pg';

// json and jsonb columns (metadata, account, payment_method, webhook bodies) are read with
// parseJson, not pg's JSON.parse: V8's JSON.parse can misread an escaped key (`"x\""` read as
// `x\` after another row had that key), and Postgres writes keys holding `"`, `\` or a control
// character escaped. pg's type parsers are process-wide; TypeORM and the raw queries share them.
types.setTypeParser(types.builtins.JSON, parseJson);
types.setTypeParser(types.builtins.JSONB, parseJson);
