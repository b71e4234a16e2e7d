// invoice.paid: a recurring plan's period paid (the first one, also announced by
// checkout.session.completed, or a renewal), booked by the invoice's id after any earlier paid period.
import type Stripe from 'stripe';
import type { Outcome, StripeContext } from './context.ts';
import { paidInvoice } from './booking.ts';
import { paidInvoiceOf } from '../stripe-subscriptions.ts';

export const invoicePaid = (event: Stripe.InvoicePaidEvent, ctx: StripeContext): Promise<Outcome> => paidInvoice(ctx, paidInvoiceOf(event.data.object));
