// Development world (see dev-world.ts): salaries post at 05:00 local and stay two days, close to
// the policy's prior.
import { devWorld } from './dev-world';

export default devWorld(5, 2);
