// Entry of the chat page's bundle (chat.js): renders the page into the HTML shell's #page.
import { render } from 'preact';
import { ChatPage } from './ChatPage.tsx';

render(<ChatPage />, document.getElementById('page')!);
