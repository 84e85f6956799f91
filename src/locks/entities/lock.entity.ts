// Kept so src/database/entities.ts resolves until it imports the entity from src/state/locks.
export { LockEntity } from '../../state/locks/entities/lock.entity';
