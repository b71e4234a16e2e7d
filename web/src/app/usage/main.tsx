// Entry of the usage page's bundle (usage.js): renders the page into the HTML shell's #page.
import { render } from 'preact';
import { UsagePage } from './UsagePage.tsx';

render(<UsagePage />, document.getElementById('page')!);
