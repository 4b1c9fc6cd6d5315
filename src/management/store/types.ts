/**
 * The management API's one storage seam. Kubernetes (store/kube.ts) in a cluster, memory
 * (store/memory.ts) in local mode; both pass the same contract suite (store/contract-suite.ts).
 *
 * Failures a caller can act on are thrown as ApiError (NotFound / Conflict / Unprocessable);
 * "not there" on reads is `undefined` or `false`, never an exception.
 */
import type { AppSpec, AppStatus } from '../../apis/v1alpha1/types.ts';
import type { KeySet } from '../../shared/run-tokens.ts';

/** The summary of a Ready condition, as the operator wrote it (absent where nothing reports one). */
export interface ReadySummary {
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
}

export interface Domain {
  /** The DomainAssignment's name. */
  domainId: string;
  hostname: string;
  /** The app the domain routes to; undefined when unassigned. */
  appName: string | undefined;
  createdAt: string;
  /** Routing status: the DomainAssignment's Ready condition (local mode routes at once). */
  status?: ReadySummary;
}

/** An app as stored: its spec (configuration) and what the operator last reported about it. */
export interface AppRecord {
  name: string;
  spec: AppSpec;
  status?: AppStatus;
  createdAt?: string;
}

export interface ServiceAccount {
  name: string;
  expiresAt: string;
  createdAt: string;
  lastUsedAt: string | undefined;
}

/** A service account with the stored hash of its token secret (never the token itself). */
export interface StoredServiceAccount extends ServiceAccount {
  /** Lowercase hex SHA-256 of the token's secret part. */
  secretHash: string;
}

export interface ManagementStore {
  projectExists(projectId: string): Promise<boolean>;
  appExists(projectId: string, appName: string): Promise<boolean>;
  /** The project's apps sorted by name; NotFound for an unknown project. */
  listApps(projectId: string): Promise<AppRecord[]>;

  listDomains(projectId: string): Promise<Domain[]>;
  getDomain(projectId: string, domainId: string): Promise<Domain | undefined>;
  /** Conflict when the id exists in the project or the hostname is taken by any project. */
  createDomain(projectId: string, domain: { domainId: string; hostname: string }): Promise<Domain>;
  /** undefined when the domain does not exist. Does not check the app (the caller does). */
  assignDomain(projectId: string, domainId: string, appName: string): Promise<Domain | undefined>;
  /** undefined when the domain does not exist; an unassigned domain is returned unchanged. */
  unassignDomain(projectId: string, domainId: string): Promise<Domain | undefined>;
  /** false when the domain did not exist. */
  deleteDomain(projectId: string, domainId: string): Promise<boolean>;

  /** Conflict when the name is taken in the project. */
  createServiceAccount(projectId: string, account: StoredServiceAccount): Promise<ServiceAccount>;
  listServiceAccounts(projectId: string): Promise<ServiceAccount[]>;
  getServiceAccount(projectId: string, name: string): Promise<StoredServiceAccount | undefined>;
  /** Deletes the account (its token stops working); false when there was none. */
  revokeServiceAccount(projectId: string, name: string): Promise<boolean>;
  /**
   * Gives an existing account a new token secret (and expiry): the previous token is refused from
   * then on. undefined when there is no such account.
   */
  rotateServiceAccount(
    projectId: string,
    name: string,
    next: { secretHash: string; expiresAt: string },
  ): Promise<ServiceAccount | undefined>;
  /** Records a use; best effort (a missing account is ignored). */
  touchServiceAccount(projectId: string, name: string, at: Date): Promise<void>;

  /** The run-token key set, generated and stored on first use. */
  getRunTokenKeys(): Promise<KeySet>;
  /** Puts a fresh signing key in front; previous keys keep verifying until they age out. */
  rotateRunTokenKeys(): Promise<KeySet>;
}
