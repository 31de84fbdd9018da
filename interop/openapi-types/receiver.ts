// A receiver written against the types openapi-typescript generates from
// Herald's /openapi.json (webhooks section). .ci/openapi-types.sh
// generates ./herald.d.ts and compiles this file with tsc --strict: if the
// document did not describe each event type version, this would not compile.
import type { webhooks } from "./herald";

type FileUpdatedV1 = webhooks["file.updated.v1"]["post"]["requestBody"]["content"]["application/json"];
type FileUpdatedV2 = webhooks["file.updated.v2"]["post"]["requestBody"]["content"]["application/json"];

export function handle(body: FileUpdatedV1 | FileUpdatedV2): string {
  if (body.version === 2) {
    const revision: number = body.data.revision;
    return `${body.id} ${body.data.file_id} r${revision} #${body.sequence}`;
  }
  return `${body.id} ${body.data.file_id} #${body.sequence}`;
}

const v1: FileUpdatedV1 = {
  id: "evt_1", type: "file.updated", version: 1, sequence: 1, tenant: "acme",
  occurred_at: "2026-01-01T00:00:00Z", data: { file_id: "f_1" },
};
handle(v1);

// invoice.paid's schema names a part of itself in $defs ("money") and
// refers to it twice: the generated type of data has those two
// properties, each a money, and nothing named $defs.
type InvoicePaid = webhooks["invoice.paid.v1"]["post"]["requestBody"]["content"]["application/json"];

export function paid(body: InvoicePaid): string {
  const cents: number = body.data.amount.value;
  return `${body.data.invoice_id} ${cents} ${body.data.amount.currency} ${body.data.refunded?.value ?? 0}`;
}

paid({
  id: "evt_2", type: "invoice.paid", version: 1, tenant: "acme", occurred_at: "2026-01-01T00:00:00Z",
  data: { invoice_id: "in_1", amount: { value: 100, currency: "EUR" } },
});
