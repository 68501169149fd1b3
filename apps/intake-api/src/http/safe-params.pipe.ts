import { HttpException, HttpStatus, Injectable, type ArgumentMetadata, type PipeTransform } from '@nestjs/common';
import { unsafeTextProblems } from '@retain/api-contract';
import { RetCode, RetMessage, isNameable } from '@retain/domain';

/**
 * Query and path parameters holding text Postgres cannot take (NUL, unpaired surrogates) are a bad
 * parameter, `400 RET400 Invalid parameter: <name>`, before any handler passes them to a query.
 * Bodies are checked per item by the validators (RET009), not here.
 */
@Injectable()
export class SafeParamsPipe implements PipeTransform {
  transform(value: unknown, metadata: ArgumentMetadata): unknown {
    if (metadata.type !== 'query' && metadata.type !== 'param') return value;
    const problems = unsafeTextProblems(value);
    if (problems.length === 0) return value;
    let name = metadata.data;
    if (name === undefined) {
      // The whole query object: its first bad key or value.
      const root = /^[^.[ ]+/.exec(problems[0]![0])?.[0] ?? '';
      // Named only when a plain word that cannot be card data (isNameable).
      name = isNameable(root) && root !== 'key' ? root : metadata.type;
    }
    throw new HttpException(
      { code: RetCode.RET400, message: RetMessage.invalidParameter(name) },
      HttpStatus.BAD_REQUEST,
    );
  }
}
