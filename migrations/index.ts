import { Initial1763800000000 } from './1763800000000-Initial.js';
import { AgendaJobs1763800001000 } from './1763800001000-AgendaJobs.js';
import { LocalProviderInstances1763800002000 } from './1763800002000-LocalProviderInstances.js';
import { Payments1763800003000 } from './1763800003000-Payments.js';
import { RentalLifecycle1763800004000 } from './1763800004000-RentalLifecycle.js';
import { AgentAuthorizations1763800005000 } from './1763800005000-AgentAuthorizations.js';
import { RentalCandidates1763800004100 } from './1763800004100-RentalCandidates.js';
import { TelegramBot1763800006000 } from './1763800006000-TelegramBot.js';
import { CheckoutRefunds1763800007000 } from './1763800007000-CheckoutRefunds.js';
import { RevealAudit1763800007100 } from './1763800007100-RevealAudit.js';
import { AgendaJobsUtcCreatedAt1763800007200 } from './1763800007200-AgendaJobsUtcCreatedAt.js';
import { AgentRequestedName1763800008300 } from './1763800008300-AgentRequestedName.js';
import { RentalListByKey1763800008400 } from './1763800008400-RentalListByKey.js';
import { ProviderCatalog1763800008500 } from './1763800008500-ProviderCatalog.js';
import { AttemptRetryAt1763800008000 } from './1763800008000-AttemptRetryAt.js';
import { KeyCounters1763800009000 } from './1763800009000-KeyCounters.js';
import { LocalSandboxUid1763800010600 } from './1763800010600-LocalSandboxUid.js';
import { KeyIssuer1763800010200 } from './1763800010200-KeyIssuer.js';
import { CheckoutRefundState1763800010900 } from './1763800010900-CheckoutRefundState.js';
import { RevealRefusalWindows1763800011000 } from './1763800011000-RevealRefusalWindows.js';
import { NotificationDeliverJobs1763800011400 } from './1763800011400-NotificationDeliverJobs.js';
import { MachineSettings1763800012000 } from './1763800012000-MachineSettings.js';
import { Events1763800013000 } from './1763800013000-Events.js';
import { Webhooks1763800014000 } from './1763800014000-Webhooks.js';
import { NotifyPreferences1763800016000 } from './1763800016000-NotifyPreferences.js';
import { IdleRentals1763800015000 } from './1763800015000-IdleRentals.js';
import { HourlyUsage1763800017000 } from './1763800017000-HourlyUsage.js';
import { AccountLockVersion1763800018200 } from './1763800018200-AccountLockVersion.js';
import { MeteringSweepIndex1763800018500 } from './1763800018500-MeteringSweepIndex.js';
import { MeteringIndexWithoutMoment1763800018700 } from './1763800018700-MeteringIndexWithoutMoment.js';
import { SshHostKeys1763800019000 } from './1763800019000-SshHostKeys.js';
import { MachineUsableAt1763800019200 } from './1763800019200-MachineUsableAt.js';
import { EventSequences1763800019400 } from './1763800019400-EventSequences.js';
import { WebhookMakersAndSlots1763800019600 } from './1763800019600-WebhookMakersAndSlots.js';
import { MachineSecretsMedium1763800019950 } from './1763800019950-MachineSecretsMedium.js';
import { EventCursors1763800020100 } from './1763800020100-EventCursors.js';
import { MatchNotes1763800020500 } from './1763800020500-MatchNotes.js';
import { OrderGpuMatch1763800020700 } from './1763800020700-OrderGpuMatch.js';
import { TrafficBilling1763800021000 } from './1763800021000-TrafficBilling.js';
import { TeardownReceipts1763800023000 } from './1763800023000-TeardownReceipts.js';
import { ProviderDrift1763800023400 } from './1763800023400-ProviderDrift.js';
import { OAuthRecords1763800024000 } from './1763800024000-OAuthRecords.js';

/** Every migration, oldest first. Register a new migration here. */
export const migrations = [
  Initial1763800000000,
  AgendaJobs1763800001000,
  LocalProviderInstances1763800002000,
  Payments1763800003000,
  RentalLifecycle1763800004000,
  RentalCandidates1763800004100,
  AgentAuthorizations1763800005000,
  TelegramBot1763800006000,
  CheckoutRefunds1763800007000,
  RevealAudit1763800007100,
  AgendaJobsUtcCreatedAt1763800007200,
  AttemptRetryAt1763800008000,
  AgentRequestedName1763800008300,
  RentalListByKey1763800008400,
  ProviderCatalog1763800008500,
  KeyCounters1763800009000,
  KeyIssuer1763800010200,
  LocalSandboxUid1763800010600,
  CheckoutRefundState1763800010900,
  RevealRefusalWindows1763800011000,
  NotificationDeliverJobs1763800011400,
  MachineSettings1763800012000,
  Events1763800013000,
  Webhooks1763800014000,
  IdleRentals1763800015000,
  NotifyPreferences1763800016000,
  HourlyUsage1763800017000,
  AccountLockVersion1763800018200,
  MeteringSweepIndex1763800018500,
  MeteringIndexWithoutMoment1763800018700,
  SshHostKeys1763800019000,
  MachineUsableAt1763800019200,
  EventSequences1763800019400,
  WebhookMakersAndSlots1763800019600,
  MachineSecretsMedium1763800019950,
  EventCursors1763800020100,
  MatchNotes1763800020500,
  OrderGpuMatch1763800020700,
  TrafficBilling1763800021000,
  TeardownReceipts1763800023000,
  ProviderDrift1763800023400,
  OAuthRecords1763800024000,
];
