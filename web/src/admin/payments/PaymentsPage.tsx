// Payments: the price list (plans and packs), an account's payments with refunds and disputes, a
// payment recorded by hand, the invoices and credit notes issued, redemption codes, and the
// processor's payments that matched nothing.
import { useState } from 'preact/hooks';
import type { PriceList } from '../api/types.ts';
import { Heading } from '../../shared/components/Page.tsx';
import { AccountPayments } from './AccountPayments.tsx';
import { CodesCard } from './CodesCard.tsx';
import { InvoicesCard } from './InvoicesCard.tsx';
import { PricesCard } from './PricesCard.tsx';
import { UnmatchedCard } from './UnmatchedCard.tsx';

export function PaymentsPage() {
  const [prices, setPrices] = useState<PriceList | null>(null);
  return (
    <>
      <Heading
        text="Payments"
        intro="Prices, what each account paid (refunds and disputes included), payments recorded by hand, invoices and credit notes, redemption codes and unmatched payments. Amounts are in the ledger’s currency."
      />
      <PricesCard onChanged={setPrices} />
      <AccountPayments prices={prices} />
      <InvoicesCard />
      <CodesCard prices={prices} />
      <UnmatchedCard />
    </>
  );
}
