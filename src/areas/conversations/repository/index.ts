/** The conversations area's SQL, one file per job. */
export * from './conversations';
export * from './messages';
export * from './tree';
export * from './replies';
export * from './approvals';
export * from './events';
