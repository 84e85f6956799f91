// Jest runs TypeScript through ts-jest in transpile-only mode (typechecking is `npm run typecheck`).
// Projects: unit (pure, fast), db (repositories and services on a real database),
// e2e (the server over real sockets), terraform (real terraform binary), deploy (the container
// image and the Kubernetes manifests, checked without a container engine or a cluster).
const base = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  // 'node': native addons (os-lock, the embedded data-dir lock) load under Jest too.
  moduleFileExtensions: ['ts', 'js', 'json', 'node'],
};
module.exports = {
  testTimeout: 120000,
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  projects: [
    { ...base, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.spec.ts'] },
    { ...base, displayName: 'db', testMatch: ['<rootDir>/test/db/**/*.spec.ts'] },
    { ...base, displayName: 'e2e', testMatch: ['<rootDir>/test/e2e/**/*.spec.ts'] },
    { ...base, displayName: 'terraform', testMatch: ['<rootDir>/test/terraform/**/*.spec.ts'] },
    { ...base, displayName: 'deploy', testMatch: ['<rootDir>/test/deploy/**/*.spec.ts'] },
  ],
};
