import ReactMarkdown from "react-markdown";
import rehypeHighlight from "rehype-highlight";

const rehypePlugins = [rehypeHighlight];

/** Model output as markdown (raw HTML is not rendered), code blocks highlighted. */
export function Markdown({ text }: { text: string }) {
  return (
    <div className="markdown">
      <ReactMarkdown rehypePlugins={rehypePlugins}>{text}</ReactMarkdown>
    </div>
  );
}
