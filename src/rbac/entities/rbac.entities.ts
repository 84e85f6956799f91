import {
  Column,
  Entity,
  Index,
  JoinColumn,
  ManyToOne,
  PrimaryColumn,
  PrimaryGeneratedColumn,
} from 'typeorm';

/** A named set of rules (`team-a-rw`, `ci-prod-writer`, …). */
@Entity({ name: 'rbac_permissions' })
export class RbacPermissionEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_rbac_permissions' })
  id!: string;

  @Index('uq_rbac_permissions_name', { unique: true })
  @Column({ type: 'text' })
  name!: string;

  @Column({ type: 'text', default: '' })
  description!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;
}

/** allow|deny of actions on unit-name globs, optionally only in some workspaces. */
@Entity({ name: 'rbac_rules' })
export class RbacRuleEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_rbac_rules' })
  id!: string;

  @Index('ix_rbac_rules_permission')
  @Column({ name: 'permission_id', type: 'uuid' })
  permissionId!: string;

  @ManyToOne(() => RbacPermissionEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'permission_id', foreignKeyConstraintName: 'fk_rbac_rules_permission' })
  permission?: RbacPermissionEntity;

  /** The rule's place in its permission (rules are listed in the order they were given). */
  @Column({ type: 'integer', default: 0 })
  position!: number;

  @Column({ type: 'text' })
  effect!: string;

  @Column({ type: 'text', array: true })
  actions!: string[];

  @Column({ type: 'text', array: true })
  resources!: string[];

  @Column({ type: 'text', array: true, nullable: true })
  workspaces!: string[] | null;
}

/** A named group of permissions, assigned to subjects. */
@Entity({ name: 'rbac_roles' })
export class RbacRoleEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_rbac_roles' })
  id!: string;

  @Index('uq_rbac_roles_name', { unique: true })
  @Column({ type: 'text' })
  name!: string;

  @Column({ type: 'text', default: '' })
  description!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;
}

@Entity({ name: 'rbac_role_permissions' })
export class RbacRolePermissionEntity {
  @PrimaryColumn({
    name: 'role_id',
    type: 'uuid',
    primaryKeyConstraintName: 'pk_rbac_role_permissions',
  })
  roleId!: string;

  @ManyToOne(() => RbacRoleEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'role_id', foreignKeyConstraintName: 'fk_rbac_role_permissions_role' })
  role?: RbacRoleEntity;

  @PrimaryColumn({
    name: 'permission_id',
    type: 'uuid',
    primaryKeyConstraintName: 'pk_rbac_role_permissions',
  })
  permissionId!: string;

  @ManyToOne(() => RbacPermissionEntity, { onDelete: 'CASCADE' })
  @JoinColumn({
    name: 'permission_id',
    foreignKeyConstraintName: 'fk_rbac_role_permissions_permission',
  })
  permission?: RbacPermissionEntity;
}

/** Binds a role to a subject: a principal (user:…, svc:…), a verified email, or an OIDC group. */
@Entity({ name: 'rbac_assignments' })
@Index('uq_rbac_assignments', ['roleId', 'subjectType', 'subjectValue'], { unique: true })
@Index('ix_rbac_assignments_subject', ['subjectType', 'subjectValue'])
export class RbacAssignmentEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_rbac_assignments' })
  id!: string;

  @Column({ name: 'role_id', type: 'uuid' })
  roleId!: string;

  @ManyToOne(() => RbacRoleEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'role_id', foreignKeyConstraintName: 'fk_rbac_assignments_role' })
  role?: RbacRoleEntity;

  /** `subject`, `email` or `group`. */
  @Column({ name: 'subject_type', type: 'text' })
  subjectType!: string;

  @Column({ name: 'subject_value', type: 'text' })
  subjectValue!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'created_by', type: 'text' })
  createdBy!: string;
}
