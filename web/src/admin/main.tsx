// Entry of the operator console's bundle (admin/console.js): renders the console into the page body.
import { render } from 'preact';
import { App } from './shell/App.tsx';

render(<App />, document.body);
