// Entry of the billing page's bundle (billing.js): renders the page into the HTML shell's #page.
import { render } from 'preact';
import { BillingPage } from './BillingPage.tsx';

render(<BillingPage />, document.getElementById('page')!);
