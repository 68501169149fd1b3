// Development world (see dev-world.ts): salaries post at 15:00 local and are spent the same day,
// far from the policy's prior (mornings). The learning policy's later cohorts must beat its first.
import { devWorld } from './dev-world';

export default devWorld(15, 0);
