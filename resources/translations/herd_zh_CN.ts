<?xml version='1.0' encoding='utf-8'?>
<!DOCTYPE TS>
<TS version="2.1" language="zh_CN">
<context>
    <name>ChatPane</name>
    <message>
        <location filename="../../gui/widgets/chat_pane.py" line="124" />
        <source>System prompt (optional)</source>
        <translation>系统提示词（可选）</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/chat_pane.py" line="132" />
        <source>New chat</source>
        <translation>新对话</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/chat_pane.py" line="133" />
        <source>Save history…</source>
        <translation>保存记录…</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/chat_pane.py" line="134" />
        <source>Copy reply</source>
        <translation>复制回复</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/chat_pane.py" line="148" />
        <source>Temperature</source>
        <translation>温度</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/chat_pane.py" line="150" />
        <source>Max tokens</source>
        <translation>最大 token 数</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/chat_pane.py" line="188" />
        <source>Start the cluster to chat with it.</source>
        <translation>启动集群后即可对话。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/chat_pane.py" line="284" />
        <source>Waiting for the first token…</source>
        <translation>等待第一个 token…</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/chat_pane.py" line="319" />
        <source>Streaming… %1 tokens</source>
        <translation>生成中… %1 个 token</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/chat_pane.py" line="342" />
        <source>The reply failed: %1</source>
        <translation>回复失败：%1</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/chat_pane.py" line="344" />
        <source>Stopped.</source>
        <translation>已停止。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/chat_pane.py" line="397" />
        <location filename="../../gui/widgets/chat_pane.py" line="403" />
        <source>Save chat history</source>
        <translation>保存对话记录</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/chat_pane.py" line="398" />
        <source>Chat history (*.json)</source>
        <translation>对话记录 (*.json)</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/chat_pane.py" line="404" />
        <source>Could not save the history: %1</source>
        <translation>无法保存记录：%1</translation>
    </message>
    <message>
        <source>%1 earlier messages are no longer sent, so the conversation fits the server's context.</source>
        <translation>之前的 %1 条消息不再发送，以便对话能放进服务器的上下文。</translation>
    </message>
    <message>
        <source>Your message is still in the box: press Ctrl+Enter to send it.</source>
        <translation>您的消息仍在输入框中：按 Ctrl+Enter 发送。</translation>
    </message>
    <message>
        <source>The reply goes on where it was cut:</source>
        <translation>回复从中断处继续：</translation>
    </message>
</context>
<context>
    <name>ClusterSession</name>
    <message>
        <location filename="../../gui/session.py" line="359" />
        <source>No llama-server is running.</source>
        <translation>没有正在运行的 llama-server。</translation>
    </message>
    <message>
        <location filename="../../gui/session.py" line="153" />
        <source>the node is gone</source>
        <translation>该节点已不在</translation>
    </message>
    <message>
        <location filename="../../gui/session.py" line="244" />
        <source>a cluster is already running; stop it first</source>
        <translation>已有集群在运行；请先停止它</translation>
    </message>
    <message>
        <location filename="../../gui/session.py" line="0" />
        <source>No cluster is running.</source>
        <translation>没有正在运行的集群。</translation>
    </message>
    <message>
        <source>Looking for nodes has not started yet; try again in a moment.</source>
        <translation>查找节点尚未开始；请稍后再试。</translation>
    </message>
</context>
<context>
    <name>Dashboard</name>
    <message>
        <location filename="../../gui/widgets/dashboard.py" line="1" />
        <source>Decode tokens/s</source>
        <translation>解码 token/秒</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/dashboard.py" line="1" />
        <source>Prompt tokens/s</source>
        <translation>提示词 token/秒</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/dashboard.py" line="1" />
        <source>first token after %1 s</source>
        <translation>%1 秒后出现首个 token</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/dashboard.py" line="73" />
        <source>Pause</source>
        <translation>暂停</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/dashboard.py" line="74" />
        <source>Hover over the graphs to read values.</source>
        <translation>将鼠标悬停在图表上可查看数值。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/dashboard.py" line="79" />
        <source>Link RTT (ms)</source>
        <translation>链路往返时延（毫秒）</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/dashboard.py" line="89" />
        <source>seconds</source>
        <translation>秒</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/dashboard.py" line="120" />
        <source>decode</source>
        <translation>生成</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/dashboard.py" line="121" />
        <source>prompt</source>
        <translation>提示词处理</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/dashboard.py" line="123" />
        <source>decode (live)</source>
        <translation>生成（实时）</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/dashboard.py" line="217" />
        <source>tok/s</source>
        <translation>token/秒</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/dashboard.py" line="217" />
        <source>ms</source>
        <translation>毫秒</translation>
    </message>
    <message>
        <source>Link throughput (%1)</source>
        <translation>链路吞吐量（%1）</translation>
    </message>
    <message>
        <source>link probe</source>
        <translation>链路探测</translation>
    </message>
    <message>
        <source>%1 (lost)</source>
        <translation>%1（已失联）</translation>
    </message>
    <message>
        <source>Last 10 minutes</source>
        <translation>最近 10 分钟</translation>
    </message>
    <message>
        <source>Last 3 days</source>
        <translation>最近 3 天</translation>
    </message>
    <message>
        <source>Last 6 hours</source>
        <translation>最近 6 小时</translation>
    </message>
    <message>
        <source>RTT</source>
        <translation>往返时延</translation>
    </message>
    <message>
        <source>hours</source>
        <translation>小时</translation>
    </message>
    <message>
        <source>minutes</source>
        <translation>分钟</translation>
    </message>
    <message>
        <source>no data yet</source>
        <translation>暂无数据</translation>
    </message>
    <message>
        <source>throughput</source>
        <translation>吞吐量</translation>
    </message>
</context>
<context>
    <name>LaunchPanel</name>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="46" />
        <source>Start</source>
        <translation>启动</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="47" />
        <source>Stop</source>
        <translation>停止</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="49" />
        <source>Not running.</source>
        <translation>未运行。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="60" />
        <source>The OpenAI-compatible endpoint appears here once running</source>
        <translation>运行后这里会显示兼容 OpenAI 的接口地址</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="61" />
        <source>Copy</source>
        <translation>复制</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="67" />
        <source>Show debug lines</source>
        <translation>显示调试信息</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="74" />
        <source>Endpoint</source>
        <translation>接口地址</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="81" />
        <source>Checks</source>
        <translation>检查结果</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="85" />
        <source>llama-server log</source>
        <translation>llama-server 日志</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="99" />
        <source>Not started: %1</source>
        <translation>未启动：%1</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="130" />
        <source>Checking the nodes…</source>
        <translation>正在检查节点…</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="160" />
        <source>Starting the workers and llama-server…</source>
        <translation>正在启动工作节点和 llama-server…</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="162" />
        <source>Loading the model onto the devices…</source>
        <translation>正在把模型加载到各设备…</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="166" />
        <source>Running.</source>
        <translation>运行中。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="175" />
        <source>Failed: %1</source>
        <translation>失败：%1</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="175" />
        <source>llama-server stopped.</source>
        <translation>llama-server 已停止。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="177" />
        <source>Stopped.</source>
        <translation>已停止。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="179" />
        <source>Stopping…</source>
        <translation>正在停止…</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="184" />
        <source>Placement verified: llama-server put every layer where the plan said.</source>
        <translation>分配已核实：llama-server 把每一层都放在了计划的位置。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="187" />
        <source>Placement differs from the plan: %1</source>
        <translation>实际分配与计划不符：%1</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/launch_panel.py" line="109" />
        <source>this PC</source>
        <translation>本机</translation>
    </message>
    <message>
        <source>Split the model over the other devices by their free memory, as when a node is lost while serving, and start.</source>
        <translation>按空闲内存把模型分到其他设备上（与服务中失去节点时的做法相同），然后启动。</translation>
    </message>
    <message>
        <source>Start without %1</source>
        <translation>不使用 %1 启动</translation>
    </message>
    <message>
        <source>This model has no chat template: llama-server would fall back to ChatML, and a model trained on another format answers with markers such as &lt;|im_end|&gt; in its words. Choose the template it was trained with:</source>
        <translation>此模型没有对话模板：llama-server 会退回使用 ChatML，而按其他格式训练的模型会在回复中夹带 &lt;|im_end|&gt; 之类的标记。请选择它训练时所用的模板：</translation>
    </message>
    <message>
        <source>ChatML (llama-server's fallback)</source>
        <translation>ChatML（llama-server 的默认回退）</translation>
    </message>
    <message>
        <source>Relaunching llama-server…</source>
        <translation>正在重新启动 llama-server…</translation>
    </message>
</context>
<context>
    <name>MainWindow</name>
    <message>
        <location filename="../../gui/app.py" line="84" />
        <source>Split</source>
        <extracomment>Comma-separated addresses of the interfaces to look for nodes on (default: all).</extracomment>
        <translation>分层</translation>
    </message>
    <message>
        <location filename="../../gui/app.py" line="85" />
        <source>Launch</source>
        <translation>启动</translation>
    </message>
    <message>
        <location filename="../../gui/app.py" line="90" />
        <source>Chat &amp;&amp; dashboard</source>
        <translation>对话与仪表盘</translation>
    </message>
    <message>
        <location filename="../../gui/app.py" line="102" />
        <source>Looking for nodes…</source>
        <translation>正在查找节点…</translation>
    </message>
    <message>
        <location filename="../../gui/app.py" line="191" />
        <source>Remembered nodes that did not answer: %1</source>
        <translation>以下已保存的节点没有响应：%1</translation>
    </message>
    <message>
        <location filename="../../gui/app.py" line="200" />
        <source>llama.cpp build %1 (herd needs %2)</source>
        <translation>llama.cpp 版本 %1（herd 需要 %2）</translation>
    </message>
    <message>
        <location filename="../../gui/app.py" line="202" />
        <source>llama.cpp engine missing: run herd engine install</source>
        <translation>缺少 llama.cpp 引擎：请运行 herd engine install</translation>
    </message>
    <message>
        <location filename="../../gui/app.py" line="748" />
        <source>Quit llama-herd</source>
        <translation>退出 llama-herd</translation>
    </message>
    <message>
        <location filename="../../gui/app.py" line="749" />
        <source>The cluster is serving. Quitting stops llama-server and the workers herd started, and ends the chat.</source>
        <translation>集群正在提供服务。退出将停止 llama-server 和 herd 启动的工作进程，并结束对话。</translation>
    </message>
    <message>
        <location filename="../../gui/app.py" line="751" />
        <source>Stop and quit</source>
        <translation>停止并退出</translation>
    </message>
</context>
<context>
    <name>ModelPanel</name>
    <message>
        <location filename="../../gui/widgets/model_panel.py" line="33" />
        <source>Open model…</source>
        <translation>打开模型…</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/model_panel.py" line="34" />
        <source>Make demo model</source>
        <translation>生成演示模型</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/model_panel.py" line="37" />
        <source>Recent models</source>
        <translation>最近使用的模型</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/model_panel.py" line="38" />
        <source>No model open. Open a GGUF file or drop one here.</source>
        <translation>尚未打开模型。请打开一个 GGUF 文件，或将其拖放到这里。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/model_panel.py" line="42" />
        <source>Model</source>
        <translation>模型</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/model_panel.py" line="66" />
        <source>unknown</source>
        <translation>未知</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/model_panel.py" line="68" />
        <source>%1 — %2, %3 layers, %4 MB, %5, context %6</source>
        <translation>%1 — %2，%3 层，%4 MB，%5，上下文 %6</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/model_panel.py" line="77" />
        <source>Cannot use %1: %2</source>
        <translation>无法使用 %1：%2</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/model_panel.py" line="80" />
        <source>Open a GGUF model</source>
        <translation>打开 GGUF 模型</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/model_panel.py" line="81" />
        <source>GGUF models (*.gguf);;All files (*)</source>
        <translation>GGUF 模型 (*.gguf);;所有文件 (*)</translation>
    </message>
    <message>
        <source>Get model…</source>
        <translation>获取模型…</translation>
    </message>
    <message>
        <source>Reading %1…</source>
        <translation>正在读取 %1…</translation>
    </message>
    <message>
        <source>%1 GB</source>
        <translation>%1 GB</translation>
    </message>
    <message>
        <source>%1 MB</source>
        <translation>%1 MB</translation>
    </message>
    <message>
        <source>%1 in %2 files</source>
        <translation>%1，共 %2 个文件</translation>
    </message>
    <message>
        <source>Fits now (size check)</source>
        <translation>当前能否装下（按大小估算）</translation>
    </message>
    <message>
        <source>Found in</source>
        <translation>来源</translation>
    </message>
    <message>
        <source>On this PC</source>
        <translation>本机上的模型</translation>
    </message>
    <message>
        <source>Size</source>
        <translation>大小</translation>
    </message>
    <message>
        <source>fits by size</source>
        <translation>按大小可装下</translation>
    </message>
    <message>
        <source>needs about %1 GB more</source>
        <translation>还需约 %1 GB</translation>
    </message>
    <message>
        <source>Still open, and shown below: %1</source>
        <translation>仍在使用（下方显示的即为此模型）：%1</translation>
    </message>
</context>
<context>
    <name>NodeCard</name>
    <message>
        <source>Another computer claims to be this node but its key is not the one pinned at pairing; this master does not use it. %1</source>
        <translation>另一台计算机冒充此节点，但其密钥不是配对时固定的密钥；本主控端不会使用它。%1</translation>
    </message>
    <message>
        <source>paired · key %1</source>
        <translation>已配对 · 密钥 %1</translation>
    </message>
    <message>
        <source>Key %1</source>
        <translation>密钥 %1</translation>
    </message>
    <message>
        <source>pair again (paired by an older version)</source>
        <translation>请重新配对（由旧版本配对）</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="90" />
        <source>Pair…</source>
        <translation>配对…</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="91" />
        <location filename="../../gui/widgets/nodes_panel.py" line="138" />
        <location filename="../../gui/widgets/nodes_panel.py" line="153" />
        <source>Start worker</source>
        <translation>启动工作进程</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="123" />
        <source>Address: %1 (API %2, RPC %3)</source>
        <translation>地址：%1（API %2，RPC %3）</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="127" />
        <location filename="../../gui/widgets/nodes_panel.py" line="149" />
        <source>lost</source>
        <translation>已失联</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="132" />
        <source>llama.cpp build %1 · RPC %2</source>
        <translation>llama.cpp 版本 %1 · RPC %2</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="134" />
        <source>paired</source>
        <translation>已配对</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="134" />
        <source>not paired</source>
        <translation>未配对</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="138" />
        <location filename="../../gui/widgets/nodes_panel.py" line="153" />
        <source>Stop worker</source>
        <translation>停止工作进程</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="141" />
        <source>worker stopped</source>
        <translation>工作进程已停止</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="141" />
        <source>worker ready</source>
        <translation>工作进程就绪</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="142" />
        <source>worker in use</source>
        <translation>工作进程使用中</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="142" />
        <source>worker starting</source>
        <translation>工作进程启动中</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="143" />
        <source>worker crashed</source>
        <translation>工作进程已崩溃</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="143" />
        <source>online</source>
        <translation>在线</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="159" />
        <location filename="../../gui/widgets/nodes_panel.py" line="179" />
        <source>CPU %1</source>
        <translation>CPU %1</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="161" />
        <source> · %1% busy</source>
        <translation> · 占用 %1%</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="163" />
        <location filename="../../gui/widgets/nodes_panel.py" line="180" />
        <source>RAM %1 free of %2</source>
        <translation>内存 可用 %1 / 共 %2</translation>
    </message>
    <message>
        <source>Weights cached %1 of at most %2</source>
        <translation>已缓存权重 %1，上限 %2</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="167" />
        <source>GPU %1: %2 free of %3</source>
        <translation>GPU %1：可用 %2 / 共 %3</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="171" />
        <source>Wi-Fi link (%1): expect slow, uneven decoding. Use a cable if you can.</source>
        <translation>Wi-Fi 连接（%1）：生成速度会慢且不稳定，建议使用网线。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="176" />
        <source>this computer (host)</source>
        <translation>本机（主控）</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="177" />
        <source>Runs llama-server; keeps the first layers and the token embeddings.</source>
        <translation>运行 llama-server，保存最前面的层和词嵌入。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="178" />
        <source>host</source>
        <translation>主控</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="186" />
        <source>RTT %1 ms</source>
        <translation>往返时延 %1 毫秒</translation>
    </message>
    <message>
        <source>Cannot keep this computer awake: %1</source>
        <translation>无法让这台电脑保持唤醒：%1</translation>
    </message>
    <message>
        <source>Kept awake while serving</source>
        <translation>服务期间保持唤醒</translation>
    </message>
    <message>
        <source>May sleep while serving (keep_awake is off in its agent.toml)</source>
        <translation>服务期间可能进入睡眠（其 agent.toml 中 keep_awake 已关闭）</translation>
    </message>
    <message>
        <source>Waiting for the node's status…</source>
        <translation>正在等待节点的状态…</translation>
    </message>
    <message>
        <source>Weights cached: —</source>
        <translation>已缓存权重：—</translation>
    </message>
    <message>
        <source>Send this computer a Wake-on-LAN packet (it must allow waking by the network, see the README)</source>
        <translation>向这台电脑发送网络唤醒（Wake-on-LAN）数据包（它必须允许通过网络唤醒，见 README）</translation>
    </message>
    <message>
        <source>Wake</source>
        <translation>唤醒</translation>
    </message>
    <message>
        <source>Pair with this node to see its hardware and load.</source>
        <translation>与此节点配对后即可查看其硬件和负载。</translation>
    </message>
</context>
<context>
    <name>NodesPanel</name>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="216" />
        <source>Add by address…</source>
        <translation>按地址添加…</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="217" />
        <source>Try a local demo</source>
        <translation>试用本地演示</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="218" />
        <source>Start two workers on this computer to see the whole loop</source>
        <translation>在本机启动两个工作节点，体验完整流程</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="219" />
        <source>No worker found yet. Start herd-agent on your other PCs, or add one by address.</source>
        <translation>尚未找到工作节点。请在其他电脑上启动 herd-agent，或按地址添加。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="240" />
        <source>Nodes</source>
        <translation>节点</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="290" />
        <source>Add a node</source>
        <translation>添加节点</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="291" />
        <source>Address of the node's herd-agent (host or host:port):</source>
        <translation>节点上 herd-agent 的地址（主机 或 主机:端口）：</translation>
    </message>
</context>
<context>
    <name>ProfileDiffDialog</name>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="27" />
        <source>Import cluster profile</source>
        <translation>导入集群配置</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="39" />
        <source>✔ Matches the live cluster: it can launch as saved.</source>
        <translation>✔ 与当前集群一致：可以按保存的配置启动。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="45" />
        <source>Use this profile</source>
        <translation>使用此配置</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="50" />
        <source>Plan</source>
        <translation>方案</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="52" />
        <source>Differences from the live cluster</source>
        <translation>与当前集群的差异</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="52" />
        <source>This profile cannot be used as it is: see what to do under each ✖.</source>
        <translation>此配置无法直接使用：请按每个 ✖ 下方的说明处理。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="53" />
        <source>The split, context and port of this profile replace the current ones. Nothing starts until you press Start.</source>
        <translation>此配置的分层、上下文和端口将替换当前设置。在按下“启动”之前不会启动任何东西。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="75" />
        <source>model</source>
        <translation>模型</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="75" />
        <source>engine</source>
        <translation>引擎</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="80" />
        <source>host CPU</source>
        <translation>主控 CPU</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="80" />
        <source>this computer</source>
        <translation>本机</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="87" />
        <source>Device</source>
        <translation>设备</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="87" />
        <source>Slots</source>
        <translation>层位数</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="87" />
        <source>Layers</source>
        <translation>层</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/profile_dialog.py" line="87" />
        <source>Address</source>
        <translation>地址</translation>
    </message>
    <message>
        <source>Pair with %1…</source>
        <translation>与 %1 配对…</translation>
    </message>
    <message>
        <source>This profile can be used once its nodes are paired: press Pair for each. This check runs again by itself; there is no need to import again.</source>
        <translation>节点配对后即可使用此配置：请为每个节点按“配对”。此检查会自动重新进行，无需重新导入。</translation>
    </message>
    <message>
        <source>Further llama-server options from the profile: %1</source>
        <translation>配置文件中的其他 llama-server 选项：%1</translation>
    </message>
    <message>
        <source>Model %2 · %3 layer slots · context %4 · port %5</source>
        <translation>模型 %2 · %3 个层槽位 · 上下文 %4 · 端口 %5</translation>
    </message>
    <message>
        <source>The endpoint will listen on %1:%2 — this computer's own setting; a profile never chooses it.</source>
        <translation>端点将在 %1:%2 上监听——这是本机自己的设置；配置文件从不决定它。</translation>
    </message>
    <message>
        <source>The profile adds no llama-server options of its own.</source>
        <translation>此配置文件未添加自己的 llama-server 选项。</translation>
    </message>
    <message>
        <source>What will run</source>
        <translation>将要运行的内容</translation>
    </message>
</context>
<context>
    <name>SplitBar</name>
    <message>
        <location filename="../../gui/widgets/split_bar.py" line="65" />
        <source>Layer split</source>
        <extracomment>Segment colours, chosen to stay distinguishable in light and dark themes.</extracomment>
        <translation>分层</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_bar.py" line="191" />
        <source>%1: %2 layer slot(s)</source>
        <translation>%1：%2 个层位</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_bar.py" line="235" />
        <source>Open a model to see its layers</source>
        <translation>打开模型后可查看各层</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_bar.py" line="267" />
        <source>output ▾</source>
        <translation>输出层 ▾</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_bar.py" line="269" />
        <source>▾ layer 0</source>
        <translation>▾ 第 0 层</translation>
    </message>
</context>
<context>
    <name>SplitEditor</name>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="1" />
        <source>Fastest optimises</source>
        <translation>最快方案优化的是</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="1" />
        <source>for chat</source>
        <translation>用于聊天</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="1" />
        <source>for documents</source>
        <translation>用于文档</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="1" />
        <source>Chat: the fastest replies. Documents: the shortest wait for the first token after a long prompt (512 tokens).</source>
        <translation>聊天：回复最快。文档：长提示词（512 个 token）之后等待首个 token 的时间最短。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="1" />
        <source>Predicted: %1 tokens/s decode.</source>
        <translation>预计：解码 %1 token/秒。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="1" />
        <source>A %1-token prompt: first token after %2 s.</source>
        <translation>%1 个 token 的提示词：%2 秒后出现首个 token。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="82" />
        <source>Context size (-c): the KV cache grows with it</source>
        <translation>上下文长度（-c）：KV 缓存随之增大</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="83" />
        <source>By memory</source>
        <translation>按内存分配</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="84" />
        <source>Split in proportion to free memory, as llama.cpp does by default</source>
        <translation>按可用内存比例分配（llama.cpp 的默认方式）</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="85" />
        <source>Fastest</source>
        <translation>最快</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="86" />
        <source>Ask the planner for the quickest split</source>
        <translation>让规划器给出最快的分层方案</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="88" />
        <source>Undo</source>
        <translation>撤销</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="89" />
        <source>Redo</source>
        <translation>重做</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="102" />
        <source>Copy command</source>
        <translation>复制命令</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="105" />
        <source>Context</source>
        <translation>上下文</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="111" />
        <source>Command line</source>
        <translation>命令行</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="189" />
        <source>%1 needs %2 but has %3 free: short by %4.</source>
        <translation>%1 需要 %2，但只有 %3 可用：还差 %4。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="324" />
        <source>host</source>
        <translation>主控</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="341" />
        <location filename="../../gui/widgets/split_editor.py" line="378" />
        <source>host CPU</source>
        <translation>主控 CPU</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="404" />
        <source>Open a model to plan the split.</source>
        <translation>打开模型后即可规划分层。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="409" />
        <source>%1 layer slots: %2 on the host, %3 on %4 device(s). Everything fits.</source>
        <translation>共 %1 个层位：主控 %2 个，%4 台设备共 %3 个。内存全部够用。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="100" />
        <source>The cluster is running another split. Relaunch to use this one (the chat waits for it).</source>
        <translation>集群正在运行另一种分层。重新启动即可使用当前这一种（对话会等待它）。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="104" />
        <source>Relaunch with this split</source>
        <translation>用此分层重新启动</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="253" />
        <source>Lower the context (now %1: the KV cache grows with it), or give layers to the devices with memory to spare.</source>
        <translation>请调低上下文（当前为 %1：KV 缓存随之增大），或把层分给仍有空闲内存的设备。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/split_editor.py" line="487" />
        <source>The context (%1) is larger than the %2 the model was trained for: llama.cpp allows it, but replies beyond %2 tokens get worse.</source>
        <translation>上下文（%1）大于模型训练时的 %2：llama.cpp 允许这样做，但超过 %2 个词元后回复质量会下降。</translation>
    </message>
    <message>
        <source>%1 needs %2, and the other devices on the same computer %3, but it has %4 free: short by %5.</source>
        <translation>%1 需要 %2，同一台电脑上的其他设备另需 %3，但它只有 %4 可用：还差 %5。</translation>
    </message>
</context>
<context>
    <name>AgentClient</name>
    <message>
        <source>the RPC worker was not ready after {seconds} s (state {state})</source>
        <translation>RPC 工作进程在 {seconds} 秒后仍未就绪（状态 {state}）</translation>
    </message>
    <message>
        <source>no reason given</source>
        <translation>未给出原因</translation>
    </message>
    <message>
        <source>the RPC worker could not start: {why}</source>
        <translation>RPC 工作进程无法启动：{why}</translation>
    </message>
    <message>
        <source>its RPC worker is in use by another llama-server ({client})</source>
        <translation>它的 RPC 工作进程正被另一个 llama-server 使用（{client}）</translation>
    </message>
    <message>
        <source>{url}: too many failed pairing attempts from this computer (HTTP 429); try again in {seconds} s</source>
        <translation>{url}：本机配对失败次数过多（HTTP 429）；请在 {seconds} 秒后重试</translation>
    </message>
    <message>
        <source>{url}: no pairing PIN is shown on the node now; run herd-agent pin there and enter the PIN within 5 minutes</source>
        <translation>{url}：节点当前没有显示配对 PIN；请在该节点运行 herd-agent pin，并在 5 分钟内输入 PIN</translation>
    </message>
    <message>
        <source>{url}: not paired (the node does not know this master's key; pair again)</source>
        <translation>{url}：未配对（节点不认识本主控端的密钥，请重新配对）</translation>
    </message>
    <message>
        <source>{url}: the key of whoever answers there is not the key pinned when this node was paired; nothing was sent to it (another device may be posing as the node)</source>
        <translation>{url}：该地址应答方的密钥不是配对时固定的密钥；未向其发送任何内容（可能有其他设备冒充此节点）</translation>
    </message>
    <message>
        <source>{url}: not paired (no pinned key for this node; pair first)</source>
        <translation>{url}：未配对（没有此节点的固定密钥，请先配对）</translation>
    </message>
    <message>
        <source>{url}: the pairing answer does not prove that it comes from the node that showed the PIN; not paired (someone may be tampering with the network)</source>
        <translation>{url}：配对应答无法证明来自显示该 PIN 的节点；未配对（可能有人在篡改网络）</translation>
    </message>
    <message>
        <location filename="../../agent/client.py" line="160" />
        <source>cannot reach agent at {url}: {why} ({kind})</source>
        <translation>无法连接 {url} 上的代理：{why}（{kind}）</translation>
    </message>
    <message>
        <location filename="../../agent/client.py" line="216" />
        <source>cannot reach echo at {address}: {why}</source>
        <translation>无法连接 {address} 的回显端口：{why}</translation>
    </message>
    <message>
        <location filename="../../agent/client.py" line="237" />
        <source>no echo from {address} ({count} probes, {timeout} s each)</source>
        <translation>{address} 没有回显（发送 {count} 次探测，每次等待 {timeout} 秒）</translation>
    </message>
    <message>
        <source>wrong PIN; enter the PIN the node shows now (herd-agent pin on that computer), a new one after each pairing</source>
        <translation>PIN 错误；请输入该节点当前显示的 PIN（在那台电脑上运行 herd-agent pin），每次配对后都会换新的</translation>
    </message>
</context>
<context>
    <name>Doctor</name>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="63" />
        <source>No llama-server found on this machine; run `herd engine install`.</source>
        <translation>本机未找到 llama-server；请运行 `herd engine install`。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="66" />
        <source>This machine runs llama.cpp build {build}; herd is tested with build {pinned}.</source>
        <translation>本机运行的是 llama.cpp 版本 {build}；herd 经过测试的是版本 {pinned}。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="69" />
        <source>llama-server build {build} found.</source>
        <translation>已找到 llama-server（版本 {build}）。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="74" />
        <source>unknown</source>
        <translation>未知</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="119" />
        <source>The agent at {url} does not answer ({why}).</source>
        <translation>{url} 上的代理没有响应（{why}）。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="122" />
        <source>{url} is now a different node ({id}); the node vanished or changed address.</source>
        <translation>{url} 现在是另一个节点（{id}）；原节点已离线或更换了地址。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="125" />
        <source>The agent answers at {url}.</source>
        <translation>{url} 上的代理响应正常。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="132" />
        <source>The node has no llama.cpp RPC worker; install the engine there (the agent MSI ships it, or `herd engine install`).</source>
        <translation>该节点没有 llama.cpp RPC 工作进程；请在该节点上安装引擎（代理的 MSI 安装包已自带，或运行 `herd engine install`）。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="136" />
        <source>The node speaks RPC protocol {proto}, this master {master}; llama-server would refuse it. Install llama.cpp build {build} on every node.</source>
        <translation>该节点使用 RPC 协议 {proto}，本主控使用 {master}；llama-server 会拒绝连接。请在所有节点上安装 llama.cpp 版本 {build}。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="141" />
        <source>The node runs llama.cpp build {build}, this master {master}; every node must run the same build.</source>
        <translation>该节点运行 llama.cpp 版本 {build}，本主控运行 {master}；所有节点必须运行同一版本。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="145" />
        <source>Same llama.cpp build ({build}) and RPC protocol ({proto}) as the master.</source>
        <translation>llama.cpp 版本（{build}）和 RPC 协议（{proto}）与主控一致。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="152" />
        <source>This master is paired with the node.</source>
        <translation>本主控已与该节点配对。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="155" />
        <source>This master is not paired with the node; run `herd pair {address} --pin PIN` with the PIN it shows.</source>
        <translation>本主控尚未与该节点配对；请用节点显示的 PIN 运行 `herd pair {address} --pin PIN`。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="159" />
        <source>The node's status could not be read ({why}).</source>
        <translation>无法读取该节点的状态（{why}）。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="165" />
        <source>Echo answers ({ms} ms round trip).</source>
        <translation>回显正常（往返 {ms} 毫秒）。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="168" />
        <source>UDP echo port {port} does not answer; a firewall may block it (latency graphs will be empty).</source>
        <translation>UDP 回显端口 {port} 没有响应，可能被防火墙拦截（延迟图表将为空）。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="176" />
        <source>Its RPC worker is in use by another client ({client}).</source>
        <translation>其 RPC 工作进程正被另一个客户端占用（{client}）。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="182" />
        <source>RPC port {endpoint} is not reachable from this master ({why}); check its firewall.</source>
        <translation>本主控无法连接 RPC 端口 {endpoint}（{why}）；请检查该节点的防火墙。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="186" />
        <source>RPC port {endpoint} is open.</source>
        <translation>RPC 端口 {endpoint} 已开放。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="189" />
        <source>Its RPC worker crashed: {error}; it will be restarted on launch.</source>
        <translation>其 RPC 工作进程已崩溃：{error}；启动时会重新启动它。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="194" />
        <source>The node reaches this network over Wi-Fi ({nic}); each token needs a round trip, so a cable will be much faster.</source>
        <translation>该节点通过 Wi-Fi（{nic}）连接本网络；每个 token 都需要一次往返，改用网线会快得多。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="199" />
        <source>This master reaches the node over Wi-Fi ({nic}); a cable will be much faster.</source>
        <translation>本主控通过 Wi-Fi（{nic}）连接该节点；改用网线会快得多。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="80" />
        <source>This machine's llama.cpp: {engine}.</source>
        <translation>本机的 llama.cpp：{engine}。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="84" />
        <source>This machine's llama-server has no RPC backend ({why}), so it cannot use the workers; build llama.cpp with -DGGML_RPC=ON, or run `herd engine install`.</source>
        <translation>本机的 llama-server 没有 RPC 后端（{why}），无法使用工作节点；请用 -DGGML_RPC=ON 编译 llama.cpp，或运行 `herd engine install`。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="95" />
        <source>build unknown</source>
        <translation>版本未知</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="97" />
        <source>build {build}, the pinned one</source>
        <translation>版本 {build}，即 herd 指定的版本</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="99" />
        <source>build {build}, not the pinned {pinned}</source>
        <translation>版本 {build}，不是 herd 指定的版本 {pinned}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="101" />
        <source>set up by hand in {folder}; {evidence}</source>
        <translation>手动安装于 {folder}；{evidence}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="104" />
        <source>installed by herd</source>
        <translation>由 herd 安装</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="105" />
        <source>yes</source>
        <translation>有</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="105" />
        <source>no</source>
        <translation>无</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="107" />
        <source>none</source>
        <translation>无</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="108" />
        <source>a {backend} build ({built}; {setup}), RPC: {rpc}; GPUs: {gpus}</source>
        <translation>{backend} 构建（{built}；{setup}），RPC：{rpc}；GPU：{gpus}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="118" />
        <source>Its llama.cpp: {engine}.</source>
        <translation>该节点的 llama.cpp：{engine}。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="123" />
        <source>The node runs llama.cpp build {build}; herd is tested with build {pinned}.</source>
        <translation>该节点运行的是 llama.cpp 版本 {build}；herd 经过测试的是版本 {pinned}。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="127" />
        <source>The node's llama.cpp does not say its build number; every node must run build {pinned}.</source>
        <translation>该节点的 llama.cpp 未报告其版本号；所有节点都必须运行版本 {pinned}。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/doctor.py" line="130" />
        <source>Its agent says: {note}.</source>
        <translation>该节点的代理提示：{note}。</translation>
    </message>
</context>
<context>
    <name>Launcher</name>
    <message>
        <source>the llama.cpp engine is missing; run herd engine install</source>
        <translation>缺少 llama.cpp 引擎；请运行 herd engine install</translation>
    </message>
    <message>
        <source>not paired (pair it with the PIN its agent shows)</source>
        <translation>尚未配对（请用其 agent 显示的 PIN 配对）</translation>
    </message>
    <message>
        <source>not reachable</source>
        <translation>无法连接</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="1" />
        <source>{node}: its RPC worker died while llama-server was {step} ({why}); it last printed: {lines}</source>
        <translation>{node}：llama-server {step}时，它的 RPC 工作进程退出了（{why}）；它最后输出的是：{lines}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="1" />
        <source>loading the model's weights</source>
        <translation>加载模型权重</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="1" />
        <source>setting up the context and KV cache</source>
        <translation>建立上下文和 KV 缓存</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="1" />
        <source>warming up the model</source>
        <translation>预热模型</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="1" />
        <source>serving</source>
        <translation>提供服务</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="1" />
        <source>starting</source>
        <translation>启动</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="1" />
        <source>(no output)</source>
        <translation>（没有输出）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="1" />
        <source>{reason} (while {step})</source>
        <translation>{reason}（发生在{step}时）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="1" />
        <source>llama-server crashed ({signal}) while {step}; it last printed: {lines}</source>
        <translation>llama-server 在{step}时崩溃（{signal}）；它最后输出的是：{lines}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="118" />
        <source>the RPC worker at {0} is unreachable (is its agent running and the worker started?)</source>
        <translation>无法连接 {0} 上的 RPC 工作进程（该节点的代理是否在运行、工作进程是否已启动？）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="121" />
        <source>an RPC worker runs a different llama.cpp RPC protocol version than this llama-server; install the same llama.cpp build on every node</source>
        <translation>有 RPC 工作进程使用的 llama.cpp RPC 协议版本与本机 llama-server 不同；请在所有节点上安装同一 llama.cpp 版本</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="125" />
        <source>an RPC worker crashed or dropped the connection during the run</source>
        <translation>运行期间有 RPC 工作进程崩溃或断开了连接</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="127" />
        <source>the port {0} is already in use on this machine; choose another with --port</source>
        <translation>本机端口 {0} 已被占用；请用 --port 换一个端口</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="131" />
        <source>a device ran out of memory while loading the model; give it fewer layers or use a smaller context</source>
        <translation>加载模型时有设备内存不足；请给它分配更少的层，或使用更小的上下文</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="134" />
        <source>llama-server could not load the model {0} (not a valid GGUF for this build?)</source>
        <translation>llama-server 无法加载模型 {0}（不是此版本可用的 GGUF 文件？）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="139" />
        <source>an RPC worker closed the connection as soon as llama-server connected: its agent lets only a paired master's key through, over herd's encrypted link (start the cluster with herd on a paired machine), or the worker crashed</source>
        <translation>llama-server 一连接，RPC 工作进程就关闭了连接：该节点的代理只放行已配对主控的密钥，且须经由 herd 的加密链路（请在已配对的计算机上用 herd 启动集群），或工作进程已崩溃</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="165" />
        <source>llama-server was killed by signal {signal}</source>
        <translation>llama-server 被信号 {signal} 终止</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="168" />
        <source>llama-server exited with status {status}: {line}</source>
        <translation>llama-server 已退出，状态码 {status}：{line}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="244" />
        <source>llama-server is already running</source>
        <translation>llama-server 已在运行</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="337" />
        <source>llama-server was not ready after {seconds} s (state {state})</source>
        <translation>llama-server 在 {seconds} 秒后仍未就绪（状态：{state}）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="488" />
        <source>the plan uses {endpoint}, which is not a known node's RPC endpoint</source>
        <translation>分层方案用到了 {endpoint}，但它不是任何已知节点的 RPC 端点</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="502" />
        <source>{node}: its RPC worker is in use by another master ({client})</source>
        <translation>{node}：其 RPC 工作进程正被另一个主控占用（{client}）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="517" />
        <source>{node}: the RPC worker could not start: {why}</source>
        <translation>{node}：RPC 工作进程无法启动：{why}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="519" />
        <source>no reason given</source>
        <translation>未说明原因</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/launcher.py" line="521" />
        <source>{node}: the RPC worker was not ready after {seconds} s (state {state})</source>
        <translation>{node}：RPC 工作进程在 {seconds} 秒后仍未就绪（状态：{state}）</translation>
    </message>
    <message>
        <source>llama-server crashed ({signal}) while {step}</source>
        <translation>llama-server 在{step}时崩溃（{signal}）</translation>
    </message>
    <message>
        <source>llama-server crashed ({signal}) while {step} with host weights repacked for this CPU{buffers}; it was started again with --no-repack, which serves but computes the host's layers more slowly, and herd starts it that way on this machine from now on (`herd engine status` says so)</source>
        <translation>llama-server 在{step}时崩溃（{signal}），主机权重已为此 CPU 重排{buffers}；已用 --no-repack 重新启动，可以正常服务，但主机上的层计算较慢；今后 herd 在本机都会这样启动它（`herd engine status` 会说明）</translation>
    </message>
    <message>
        <source>llama-server stopped with status {status} while {step}</source>
        <translation>llama-server 在{step}时退出，状态码 {status}</translation>
    </message>
    <message>
        <source>a cluster is already running; stop it first</source>
        <translation>已有集群在运行；请先停止它</translation>
    </message>
</context>
<context>
    <name>Plan</name>
    <message>
        <location filename="../../gui/cluster/planning/plan.py" line="1" />
        <source>{device}: needs {need} (and keeps {headroom} free) of {free} free — {verdict}</source>
        <translation>{device}：需要 {need}（另留 {headroom} 空闲），可用 {free} — {verdict}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/planning/plan.py" line="497" />
        <source>host CPU</source>
        <translation>主控 CPU</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/planning/plan.py" line="516" />
        <source>unknown</source>
        <translation>未知</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/planning/plan.py" line="518" />
        <source>fits</source>
        <translation>够用</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/planning/plan.py" line="519" />
        <source>short by {size}</source>
        <translation>还差 {size}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/planning/plan.py" line="520" />
        <source>{device}: needs {need} of {free} free — {verdict}</source>
        <translation>{device}：需要 {need}，可用 {free} — {verdict}</translation>
    </message>
    <message>
        <source>{device}: needs {need}, and the other devices on the same computer {shared}, of {free} free — {verdict}</source>
        <translation>{device}：需要 {need}，同一台电脑上的其他设备另需 {shared}，可用 {free} — {verdict}</translation>
    </message>
    <message>
        <source>the fastest split does not fit once the devices on the same computer share its memory: {misfits}</source>
        <translation>同一台计算机上的设备共用其内存后，最快的分层方案放不下：{misfits}</translation>
    </message>
    <message>
        <source>{device}: needs {need} (of which the draft model {draft}) of {free} free — {verdict}</source>
        <translation>{device}：需要 {need}（其中草稿模型占 {draft}），可用 {free} — {verdict}</translation>
    </message>
</context>
<context>
    <name>Placement</name>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="430" />
        <source>the host's weights are {got} (llama.cpp repacks some for this CPU), which no split of keeping {slots} and the token embeddings between those buffers explains ({want} in all)</source>
        <translation>主机的权重为 {got}（llama.cpp 为这颗 CPU 重排了其中一部分），但把保留 {slots} 和词嵌入所需的权重（共 {want}）分到这些缓冲区，无论怎样分都对不上</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="239" />
        <source>none</source>
        <translation>无</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="245" />
        <source>no slot</source>
        <translation>没有层位</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="246" />
        <source>slot {slots}</source>
        <translation>层位 {slots}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="247" />
        <source>slots {slots}</source>
        <translation>层位 {slots}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="307" />
        <source>llama-server's log has no placement report (it needs -lv {level} or higher)</source>
        <translation>llama-server 的日志中没有层分布报告（需要 -lv {level} 或更高）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="314" />
        <source>no RPC device</source>
        <translation>没有 RPC 设备</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="315" />
        <source>llama-server's device order is {got}; the plan expected {want}</source>
        <translation>llama-server 的设备顺序是 {got}；分层方案预期的是 {want}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="323" />
        <source>llama-server's model has {total} layer slots, the plan has {planned}</source>
        <translation>llama-server 加载的模型有 {total} 个层位，分层方案有 {planned} 个</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="326" />
        <source>llama-server offloaded {off} of {total} slots (the host keeps {host}), the plan offloads {planned}</source>
        <translation>llama-server 卸载了 {total} 个层位中的 {off} 个（主控保留 {host}），分层方案卸载 {planned} 个</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="335" />
        <source>{endpoint} holds layer slots {got}, the plan gave it {want}</source>
        <translation>{endpoint} 持有层位 {got}，分层方案分给它的是 {want}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="374" />
        <source>{low} to {high}</source>
        <translation>{low} 至 {high}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="377" />
        <source>{size} of the file</source>
        <translation>文件中的 {size}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="386" />
        <source>the host's weights are {got}, but keeping {slots} and the token embeddings takes {want}</source>
        <translation>主控的权重为 {got}，但保留{slots}和词元嵌入需要 {want}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="412" />
        <source>{device} holds {got} ({size} of weights), the plan gave it {want} ({planned})</source>
        <translation>{device} 持有{got}（权重 {size}），分层方案分给它的是{want}（{planned}）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="417" />
        <source>{device}: {size} of weights; its slots cannot be told because an earlier device's could not</source>
        <translation>{device}：权重 {size}；由于前一台设备的层位无法确定，它的层位也无法确定</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="422" />
        <source>{device} has {size} of weights, which is no run of whole slots from slot {start}; the plan gave it {want} ({planned})</source>
        <translation>{device} 有 {size} 的权重，与从层位 {start} 起的任何连续整数个层位都不吻合；分层方案分给它的是{want}（{planned}）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="428" />
        <source>{device}: {size} of weights fits {n} slot counts from slot {start} ({counts}): some slots are smaller than the log's rounding, so bytes alone cannot tell; use --verify-layers</source>
        <translation>{device}：权重 {size}，从层位 {start} 起有 {n} 种层数都吻合（{counts}）：有些层位小于日志的舍入精度，仅凭字节数无法判断；请使用 --verify-layers</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/placement.py" line="436" />
        <source>the reported weights cover slots up to {last}, the model has {n} slots (0-{top})</source>
        <translation>报告的权重只覆盖到层位 {last}，而模型有 {n} 个层位（0-{top}）</translation>
    </message>
</context>
<context>
    <name>Model</name>
    <message>
        <location filename="../../gui/cluster/llama/model.py" line="58" />
        <source>{path}: cannot read the model file ({why})</source>
        <translation>{path}：无法读取模型文件（{why}）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/llama/model.py" line="247" />
        <source>{path}: not a file</source>
        <translation>{path}：不是文件</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/llama/model.py" line="266" />
        <source>{path}: unsupported architecture {arch}: it is not a text-generation model that llama-server can split over workers</source>
        <translation>{path}：不支持的架构 {arch}：它不是 llama-server 能分配到各工作进程上的文本生成模型</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/llama/model.py" line="270" />
        <source>{path}: unsupported architecture {arch}: not a model architecture llama.cpp knows</source>
        <translation>{path}：不支持的架构 {arch}：llama.cpp 不认识这种模型架构</translation>
    </message>
    <message>
        <source>{path}: this is not the first file of a split model; open {first} (llama.cpp finds the other files by name)</source>
        <translation>{path}：这不是分卷模型的第一个文件；请打开 {first}（llama.cpp 会按文件名找到其余文件）</translation>
    </message>
    <message>
        <source>{path}: part of a split model is missing or unreadable ({why})</source>
        <translation>{path}：分卷模型的某个文件缺失或无法读取（{why}）</translation>
    </message>
    <message>
        <source>GGUF format version {version} is not one llama.cpp reads (2 or 3)</source>
        <translation>GGUF 格式版本 {version} 不是 llama.cpp 能读取的版本（2 或 3）</translation>
    </message>
    <message>
        <source>it does not start with the GGUF signature</source>
        <translation>它不以 GGUF 签名开头</translation>
    </message>
    <message>
        <source>key general.alignment must be a power of two, got {value}</source>
        <translation>键 general.alignment 必须是 2 的幂，实际为 {value}</translation>
    </message>
    <message>
        <source>key number {n} has a name of {length} bytes; a key name takes at most {most}</source>
        <translation>第 {n} 个键的名称长 {length} 字节；键名最多 {most} 字节</translation>
    </message>
    <message>
        <source>key {key} appears twice</source>
        <translation>键 {key} 出现了两次</translation>
    </message>
    <message>
        <source>key {key} has an unknown value type ({type})</source>
        <translation>键 {key} 的值类型未知（{type}）</translation>
    </message>
    <message>
        <source>key {key} holds an array of an unknown value type ({type})</source>
        <translation>键 {key} 是一个元素类型未知（{type}）的数组</translation>
    </message>
    <message>
        <source>key {key} holds an array of arrays, which GGUF models do not use</source>
        <translation>键 {key} 是数组的数组，GGUF 模型不使用这种结构</translation>
    </message>
    <message>
        <source>tensor number {n} has a name of {length} bytes; llama.cpp takes at most {most}</source>
        <translation>第 {n} 个张量的名称长 {length} 字节；llama.cpp 最多接受 {most} 字节</translation>
    </message>
    <message>
        <source>tensor {name} appears twice</source>
        <translation>张量 {name} 出现了两次</translation>
    </message>
    <message>
        <source>tensor {name} has more elements than a file can hold</source>
        <translation>张量 {name} 的元素数量超过了文件所能容纳的上限</translation>
    </message>
    <message>
        <source>tensor {name} has {n} dimensions; llama.cpp takes at most {most}</source>
        <translation>张量 {name} 有 {n} 个维度；llama.cpp 最多接受 {most} 个</translation>
    </message>
    <message>
        <source>tensor {name} starts at an offset that is not a multiple of the alignment {alignment}</source>
        <translation>张量 {name} 的起始偏移不是对齐值 {alignment} 的整数倍</translation>
    </message>
    <message>
        <source>the format version</source>
        <translation>格式版本</translation>
    </message>
    <message>
        <source>the header ends inside {what}</source>
        <translation>文件头在 {what} 中途结束</translation>
    </message>
    <message>
        <source>the key count</source>
        <translation>键的数量</translation>
    </message>
    <message>
        <source>the list of keys</source>
        <translation>键列表</translation>
    </message>
    <message>
        <source>the list of tensors</source>
        <translation>张量列表</translation>
    </message>
    <message>
        <source>the name of key number {n}</source>
        <translation>第 {n} 个键的名称</translation>
    </message>
    <message>
        <source>the name of tensor number {n}</source>
        <translation>第 {n} 个张量的名称</translation>
    </message>
    <message>
        <source>the tensor count</source>
        <translation>张量的数量</translation>
    </message>
    <message>
        <source>{path}: corrupt GGUF file: {why}</source>
        <translation>{path}：GGUF 文件已损坏：{why}</translation>
    </message>
    <message>
        <source>{path}: not a GGUF file (it does not start with the GGUF signature that every llama.cpp model file has)</source>
        <translation>{path}：不是 GGUF 文件（它不以每个 llama.cpp 模型文件都有的 GGUF 签名开头）</translation>
    </message>
    <message>
        <source>{path}: tensor {name} has a ggml type ({type}) that llama.cpp does not know</source>
        <translation>{path}：张量 {name} 的 ggml 类型（{type}）是 llama.cpp 不认识的</translation>
    </message>
    <message>
        <source>{path}: truncated or corrupt GGUF file: {why}</source>
        <translation>{path}：GGUF 文件不完整或已损坏：{why}</translation>
    </message>
    <message>
        <source>{what} (it declares {count} entries)</source>
        <translation>{what}（声明了 {count} 项）</translation>
    </message>
    <message>
        <source>{what} is not UTF-8 text</source>
        <translation>{what} 不是 UTF-8 文本</translation>
    </message>
    <message>
        <source>the header goes on past {most} MiB, which no model's does ({why})</source>
        <translation>文件头超过了 {most} MiB，没有哪个模型的文件头有这么长（{why}）</translation>
    </message>
    <message>
        <source>{what} declares {count} entries; a model has at most {most}</source>
        <translation>{what}声明了 {count} 项；模型最多只有 {most} 项</translation>
    </message>
</context>
<context>
    <name>FailoverBanner</name>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>Cancel</source>
        <translation>取消</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>Relaunch now</source>
        <translation>立即重新启动</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>Run with more layers on this computer</source>
        <translation>在本机上运行更多层</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>Hide</source>
        <translation>隐藏</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>%1 was lost</source>
        <translation>%1 已失联</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>llama-server stopped</source>
        <translation>llama-server 已停止</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>this computer alone</source>
        <translation>仅本机</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>Relaunching on %1 in %2 s…</source>
        <translation>%2 秒后在 %1 上重新启动…</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>Automatic relaunch cancelled. The cluster stays down until you relaunch it.</source>
        <translation>已取消自动重新启动。在你重新启动之前，集群保持停止。</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>The model does not fit without %1</source>
        <translation>没有 %1，模型放不下</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>the lost node</source>
        <translation>失联的节点</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>Waiting: %1</source>
        <translation>等待中：%1</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>Relaunching…</source>
        <translation>正在重新启动…</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>Could not relaunch</source>
        <translation>无法重新启动</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>Serving again — you can continue the conversation</source>
        <translation>已恢复服务——可以继续对话</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>%1 is back</source>
        <translation>%1 已恢复</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>%1 is back; re-planning with it</source>
        <translation>%1 已恢复；正在重新规划并使用它</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>Wait for %1</source>
        <translation>等待 %1</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="0" />
        <source>Use %1 again</source>
        <translation>重新使用 %1</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/failover_banner.py" line="123" />
        <source>%1 dropped out and answers again; relaunching with it</source>
        <translation>%1 曾失联，现已重新响应；将带上它重新启动</translation>
    </message>
</context>
<context>
    <name>Failover</name>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="368" />
        <source>its agent does not answer: {why}</source>
        <translation>其代理没有响应：{why}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="377" />
        <source>its RPC worker was lost ({why}); llama-server's connection to it is gone</source>
        <translation>其 RPC 工作进程已丢失（{why}）；llama-server 与它的连接已断开</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="379" />
        <source>its RPC worker crashed and its agent restarted it; llama-server's connection to it is gone</source>
        <translation>其 RPC 工作进程崩溃后已由代理重启；llama-server 与它的连接已断开</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="382" />
        <source>its RPC worker is {state} ({why})</source>
        <translation>其 RPC 工作进程{state}（{why}）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="383" />
        <source>its RPC worker is {state}</source>
        <translation>其 RPC 工作进程{state}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="384" />
        <source>stopped</source>
        <translation>已停止</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="384" />
        <source>crashed</source>
        <translation>已崩溃</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="443" />
        <source>{names} is back; re-planning with it</source>
        <translation>{names} 已恢复；正在把它重新纳入分层方案</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="446" />
        <source>{names} is back</source>
        <translation>{names} 已恢复</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="456" />
        <source>{names} is back; re-plan with it to use it again</source>
        <translation>{names} 已恢复；重新规划分层即可再次使用它</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="477" />
        <source>{node} ({host}) was lost: {why}</source>
        <translation>{node}（{host}）已丢失：{why}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="479" />
        <source>it exited</source>
        <translation>进程已退出</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="481" />
        <source>llama-server stopped: {why}</source>
        <translation>llama-server 已停止：{why}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="483" />
        <source>{node} was lost</source>
        <translation>{node} 已丢失</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="484" />
        <source>llama-server stopped ({why})</source>
        <translation>llama-server 已停止（{why}）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="493" />
        <source>llama-server stopped {count} times within {seconds} s of a relaunch ({why}); not relaunching again</source>
        <translation>llama-server 在重新启动后 {seconds} 秒内已停止 {count} 次（{why}）；不再自动重新启动</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="603" />
        <source>the model does not fit on what is left ({misfits}). Options: wait for {names} to come back, or run with more layers on this computer (slow, may swap)</source>
        <translation>剩余的设备放不下模型（{misfits}）。可以等待 {names} 恢复，或在本机上运行更多层（较慢，可能用到交换空间）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="607" />
        <source>the lost node</source>
        <translation>丢失的节点</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="611" />
        <source>this computer alone</source>
        <translation>仅本机</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="612" />
        <source>new plan on {where} ({why})</source>
        <translation>新的分层方案：{where}（{why}）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="613" />
        <source>new plan on {where}</source>
        <translation>新的分层方案：{where}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="616" />
        <source>auto-recover is off: relaunch on {where} when you choose</source>
        <translation>自动恢复已关闭：请在需要时在 {where} 上重新启动</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="628" />
        <source>could not relaunch: {why}</source>
        <translation>无法重新启动：{why}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="629" />
        <source>waiting for a node to come back</source>
        <translation>正在等待节点恢复</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="641" />
        <source>relaunching on {where} in {seconds} s</source>
        <translation>{seconds} 秒后在 {where} 上重新启动</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="649" />
        <source>automatic relaunch cancelled</source>
        <translation>已取消自动重新启动</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="650" />
        <source>waiting: relaunch on {where} when you choose</source>
        <translation>等待中：请在需要时在 {where} 上重新启动</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="656" />
        <source>waiting for {names} to come back</source>
        <translation>正在等待 {names} 恢复</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="666" />
        <source>there is no plan to relaunch</source>
        <translation>没有可用于重新启动的分层方案</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="669" />
        <source>relaunching llama-server on {url} with more layers on this computer</source>
        <translation>正在 {url} 上重新启动 llama-server，并在本机上放更多层</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="671" />
        <source>relaunching llama-server on {url}</source>
        <translation>正在 {url} 上重新启动 llama-server</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="680" />
        <source>relaunch failed: {why}</source>
        <translation>重新启动失败：{why}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="689" />
        <source>serving again at {url} on {names}, {seconds} s after the loss</source>
        <translation>已在 {url} 恢复服务，使用 {names}，距丢失 {seconds} 秒</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="690" />
        <source>serving again at {url} on {names}</source>
        <translation>已在 {url} 恢复服务，使用 {names}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="693" />
        <source> (placement differs from the plan: {problems})</source>
        <translation>（层分布与方案不同：{problems}）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="719" />
        <source>no reply within {seconds} s (is the PC asleep, switched off or off the network?)</source>
        <translation>{seconds} 秒内没有回复（这台电脑是否已休眠、关机或断网？）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/failover/supervisor.py" line="722" />
        <source>connection refused (herd-agent is not running there any more)</source>
        <translation>连接被拒绝（该电脑上的 herd-agent 已不在运行）</translation>
    </message>
</context>
<context>
    <name>Hub</name>
    <message>
        <source>{repo} has no GGUF file named {name} (it has: {have})</source>
        <translation>{repo} 中没有名为 {name} 的 GGUF 文件（现有：{have}）</translation>
    </message>
    <message>
        <source>{repo} has no {quant} file (quant types there: {have})</source>
        <translation>{repo} 中没有 {quant} 文件（现有的量化类型：{have}）</translation>
    </message>
    <message>
        <source>download cancelled</source>
        <translation>下载已取消</translation>
    </message>
    <message>
        <source>{what}: no such repository at {endpoint} (check the name, e.g. owner/model-GGUF)</source>
        <translation>{what}：{endpoint} 上没有这个仓库（请检查名称，例如 owner/model-GGUF）</translation>
    </message>
    <message>
        <source>{what}: no such revision</source>
        <translation>{what}：没有这个版本</translation>
    </message>
    <message>
        <source>{what}: the hub at {endpoint} did not answer as expected ({why}); check the network or the hub address (a mirror can be set in the settings or with HF_ENDPOINT)</source>
        <translation>{what}：{endpoint} 上的模型库没有按预期应答（{why}）；请检查网络或模型库地址（可在设置中或用 HF_ENDPOINT 指定镜像）</translation>
    </message>
    <message>
        <source>type part of a model's name to search for</source>
        <translation>请输入模型名称的一部分来搜索</translation>
    </message>
    <message>
        <source>{path}: the download stopped ({why}); start it again to resume where it stopped</source>
        <translation>{path}：下载中断（{why}）；再次开始即可从中断处继续</translation>
    </message>
    <message>
        <source>{path}: the downloaded file is damaged (its SHA-256 is {got}, the hub lists {want}); it was deleted, download it again</source>
        <translation>{path}：下载的文件已损坏（其 SHA-256 为 {got}，模型库记录为 {want}）；已将其删除，请重新下载</translation>
    </message>
    <message>
        <source>not enough disk space in {dir}: the model needs {need} MB and {free} MB are free; free some space or choose another models folder</source>
        <translation>{dir} 磁盘空间不足：模型需要 {need} MB，可用 {free} MB；请释放一些空间或选择其他模型文件夹</translation>
    </message>
    <message>
        <source>not a usable GGUF file: {why}</source>
        <translation>不是可用的 GGUF 文件：{why}</translation>
    </message>
    <message>
        <source>{path}: the GGUF header does not end within the file's first {n} bytes: not a usable GGUF file ({why})</source>
        <translation>{path}：GGUF 文件头在文件的前 {n} 字节内没有结束：不是可用的 GGUF 文件（{why}）</translation>
    </message>
</context>
<context>
    <name>HubDialog</name>
    <message>
        <source>Get a model</source>
        <translation>获取模型</translation>
    </message>
    <message>
        <source>Leave empty for huggingface.co. Where it cannot be reached (in mainland China, for example) enter a mirror such as https://hf-mirror.com; herd remembers it.</source>
        <translation>留空则使用 huggingface.co。无法访问它的地方（例如中国大陆）请填写镜像地址，如 https://hf-mirror.com；herd 会记住它。</translation>
    </message>
    <message>
        <source>Model name, e.g. Qwen2.5 7B GGUF</source>
        <translation>模型名称，例如 Qwen2.5 7B GGUF</translation>
    </message>
    <message>
        <source>Search</source>
        <translation>搜索</translation>
    </message>
    <message>
        <source>File</source>
        <translation>文件</translation>
    </message>
    <message>
        <source>Quant</source>
        <translation>量化</translation>
    </message>
    <message>
        <source>Size</source>
        <translation>大小</translation>
    </message>
    <message>
        <source>Fits</source>
        <translation>能否装下</translation>
    </message>
    <message>
        <source>Split</source>
        <translation>分层</translation>
    </message>
    <message>
        <source>Speed</source>
        <translation>速度</translation>
    </message>
    <message>
        <source>Saved to %1</source>
        <translation>保存到 %1</translation>
    </message>
    <message>
        <source>Download</source>
        <translation>下载</translation>
    </message>
    <message>
        <source>Cancel download</source>
        <translation>取消下载</translation>
    </message>
    <message>
        <source>Close</source>
        <translation>关闭</translation>
    </message>
    <message>
        <source>Hub</source>
        <translation>模型库</translation>
    </message>
    <message>
        <source>Context</source>
        <translation>上下文</translation>
    </message>
    <message>
        <source>Searching…</source>
        <translation>正在搜索…</translation>
    </message>
    <message>
        <source>Reading the headers of %1's GGUF files…</source>
        <translation>正在读取 %1 中 GGUF 文件的文件头…</translation>
    </message>
    <message>
        <source>%1 — %2 downloads</source>
        <translation>%1 — %2 次下载</translation>
    </message>
    <message>
        <source>Pick a repository to see its files.</source>
        <translation>选择一个仓库以查看其文件。</translation>
    </message>
    <message>
        <source>No GGUF repositories match.</source>
        <translation>没有匹配的 GGUF 仓库。</translation>
    </message>
    <message>
        <source>no paired nodes</source>
        <translation>没有已配对的节点</translation>
    </message>
    <message>
        <source>Fit on: %1 and this PC</source>
        <translation>按以下设备计算：%1 和本机</translation>
    </message>
    <message>
        <source> (%1 files)</source>
        <translation>（%1 个文件）</translation>
    </message>
    <message>
        <source>≈ %1 tok/s</source>
        <translation>≈ %1 词元/秒</translation>
    </message>
    <message>
        <source>not measured yet</source>
        <translation>尚未测量</translation>
    </message>
    <message>
        <source>fits</source>
        <translation>装得下</translation>
    </message>
    <message>
        <source>does not fit</source>
        <translation>装不下</translation>
    </message>
    <message>
        <source>★ The largest file that fits is selected.</source>
        <translation>★ 已选中装得下的最大文件。</translation>
    </message>
    <message>
        <source>Nothing fits at this context: try a smaller context or add a node.</source>
        <translation>在此上下文长度下没有装得下的文件：请减小上下文或添加节点。</translation>
    </message>
    <message>
        <source>Checking the SHA-256 of %1…</source>
        <translation>正在校验 %1 的 SHA-256…</translation>
    </message>
    <message>
        <source>, %1 s left</source>
        <translation>，还剩 %1 秒</translation>
    </message>
    <message>
        <source>Downloading %1: %2 of %3 MB at %4 MB/s%5</source>
        <translation>正在下载 %1：%2 / %3 MB，%4 MB/秒%5</translation>
    </message>
    <message>
        <source>Downloaded and verified: %1. It is open in the split editor.</source>
        <translation>已下载并校验：%1。已在分层编辑器中打开。</translation>
    </message>
    <message>
        <source>Download stopped. Download again to resume where it stopped.</source>
        <translation>下载已停止。再次下载即可从中断处继续。</translation>
    </message>
    <message>
        <source>Decode speed predicted from the nodes' measured speeds (Fastest in the split editor, or herd bench). A quant type other than the one measured is estimated per weight, which errs on the slow side. Not measured yet: open a model and press Fastest once.</source>
        <translation>根据各节点实测速度预测的解码速度（分层编辑器中的“最快”，或 herd bench）。与实测模型量化类型不同的文件按权重数估算，结果偏保守。尚未测量：先打开一个模型并按一次“最快”。</translation>
    </message>
    <message>
        <source>%1 — 1 download</source>
        <translation>%1 — 1 次下载</translation>
    </message>
    <message>
        <source>Reading the header of %1 (file %2 of %3)…</source>
        <translation>正在读取 %1 的文件头（第 %2 个，共 %3 个）…</translation>
    </message>
</context>
<context>
    <name>NetworkErrors</name>
    <message>
        <location filename="../../gui/cluster/nodes/network_errors.py" line="38" />
        <source>No computer of that name was found on the network. Check the name, or type its IP address instead (for example 192.168.1.20).</source>
        <translation>网络上找不到这个名字的计算机。请检查名称，或改为输入它的 IP 地址（例如 192.168.1.20）。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/nodes/network_errors.py" line="41" />
        <source>No reply in time. The computer may be asleep, switched off, or on another network.</source>
        <translation>未能及时收到回复。该计算机可能已休眠、已关机或不在同一网络中。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/nodes/network_errors.py" line="45" />
        <source>Nothing answers at that address. Check that herd-agent runs on that computer and that the port is right (herd-agent uses 50050 unless told otherwise).</source>
        <translation>该地址没有任何响应。请确认那台计算机上正在运行 herd-agent，且端口正确（herd-agent 默认使用 50050）。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/nodes/network_errors.py" line="48" />
        <source>That address cannot be reached from this computer. Is it on another network?</source>
        <translation>本机无法到达该地址。它是否在另一个网络中？</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/nodes/network_errors.py" line="51" />
        <source>The connection was cut off in the middle of the reply (the server or one of its workers stopped).</source>
        <translation>回复途中连接被切断（服务器或其某个工作进程已停止）。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/nodes/network_errors.py" line="54" />
        <source>Could not connect. Check the address and that the computer is on this network.</source>
        <translation>无法连接。请检查地址，并确认该计算机在同一网络中。</translation>
    </message>
</context>
<context>
    <name>PinDialog</name>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="216" />
        <source>Pair with node</source>
        <translation>与节点配对</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="217" />
        <source>Enter the PIN %1 shows (herd-agent pin on that computer):</source>
        <translation>请输入 %1 显示的 PIN（在那台计算机上运行 herd-agent pin）：</translation>
    </message>
    <message>
        <location filename="../../gui/widgets/nodes_panel.py" line="243" />
        <source>The PIN has %1 digits (%2 typed).</source>
        <translation>PIN 为 %1 位数字（已输入 %2 位）。</translation>
    </message>
</context>
<context>
    <name>Profile</name>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="456" />
        <source>node is missing (id {nid}, last at {address})</source>
        <translation>节点不在（ID {nid}，上次在 {address}）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="458" />
        <source>Start its herd-agent and pair with it, then import again; or make a new split over the nodes you have and export that.</source>
        <translation>请启动它的 herd-agent 并完成配对，然后重新导入；或在现有节点上重新分层并导出新的配置。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="462" />
        <source>node does not answer at {host}</source>
        <translation>节点在 {host} 没有响应</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="464" />
        <source>Check that the computer is on and its herd-agent runs, then import again.</source>
        <translation>请确认该计算机已开机且 herd-agent 正在运行，然后重新导入。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="468" />
        <source>address changed from {old} to {new}</source>
        <translation>地址已从 {old} 变为 {new}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="470" />
        <source>The plan uses the new address.</source>
        <translation>方案将使用新地址。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="472" />
        <source>pairing key changed (the agent was reinstalled?)</source>
        <translation>配对密钥已变化（agent 是否重新安装过？）</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="475" />
        <source>runs llama.cpp build {build}, the profile needs {need}</source>
        <translation>运行的是 llama.cpp 版本 {build}，该配置需要 {need}</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="477" />
        <source>Install that build on the node (herd engine install).</source>
        <translation>请在该节点上安装该版本（herd engine install）。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="479" />
        <source>this master runs llama.cpp build {build}, the profile was made with {need}</source>
        <translation>本主控运行的是 llama.cpp 版本 {build}，该配置用 {need} 制作</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="482" />
        <source>Install that build here (herd engine install).</source>
        <translation>请在本机安装该版本（herd engine install）。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="485" />
        <source>{path} is missing</source>
        <translation>{path} 不存在</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="486" />
        <source>Put the model file back at that path, or open the model and export a new profile.</source>
        <translation>请把模型文件放回该路径，或打开模型后导出新的配置。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="489" />
        <source>Open the profile's own model file, or export a new profile for this one.</source>
        <translation>请打开该配置自己的模型文件，或为当前模型导出新的配置。</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="491" />
        <source>other model: {path} has {size} bytes, the profile's had {saved}</source>
        <translation>不是同一个模型：{path} 有 {size} 字节，配置中的模型有 {saved} 字节</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="495" />
        <source>other model: {n} layers, the plan is for {m}</source>
        <translation>不是同一个模型：{n} 层，方案针对的是 {m} 层</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/profile.py" line="498" />
        <source>other model: its SHA-256 differs from the profile's</source>
        <translation>不是同一个模型：SHA-256 与配置中的不同</translation>
    </message>
    <message>
        <source>Press Pair and type the PIN its herd-agent shows (herd-agent pin on that computer).</source>
        <translation>请按“配对”，输入它的 herd-agent 显示的 PIN（在那台计算机上运行 herd-agent pin）。</translation>
    </message>
    <message>
        <source>Profile applied: {model}, layer slots {split}. Nothing runs until you press Start.</source>
        <translation>已应用配置：{model}，层位分配 {split}。在按下“启动”之前不会运行任何东西。</translation>
    </message>
    <message>
        <source>This profile cannot be used now:</source>
        <translation>此配置现在无法使用：</translation>
    </message>
    <message>
        <source>Wait a moment: this check runs again by itself.</source>
        <translation>请稍候：此检查会自动重新进行。</translation>
    </message>
    <message>
        <source>node has not reported its devices yet</source>
        <translation>节点尚未报告它的设备</translation>
    </message>
    <message>
        <source>node is not paired with this computer</source>
        <translation>节点尚未与本机配对</translation>
    </message>
    <message>
        <source>this computer</source>
        <translation>本机</translation>
    </message>
    <message>
        <source>Only tuning options are accepted (sampling, context, batch, threads, cache); check that you want these.</source>
        <translation>只接受调优选项（采样、上下文、批大小、线程、缓存）；请确认您需要这些选项。</translation>
    </message>
    <message>
        <source>Using the profile changes the split; press Start to relaunch with it.</source>
        <translation>使用此配置文件会改变拆分；按“启动”以新的拆分重新启动。</translation>
    </message>
    <message>
        <source>Using the profile replaces the editor's split.</source>
        <translation>使用此配置文件会替换编辑器中的拆分。</translation>
    </message>
    <message>
        <source>context {new} replaces {old}</source>
        <translation>上下文 {new} 将替换 {old}</translation>
    </message>
    <message>
        <source>differs from the split in the editor ({split})</source>
        <translation>与编辑器中的拆分不同（{split}）</translation>
    </message>
    <message>
        <source>differs from the split serving now ({split})</source>
        <translation>与当前正在服务的拆分不同（{split}）</translation>
    </message>
    <message>
        <source>port {new} replaces {old}</source>
        <translation>端口 {new} 将替换 {old}</translation>
    </message>
    <message>
        <source>replaces this computer's llama-server options {old}</source>
        <translation>将替换本机的 llama-server 选项 {old}</translation>
    </message>
    <message>
        <source>the endpoint's model id becomes {alias}</source>
        <translation>端点的模型 ID 将变为 {alias}</translation>
    </message>
    <message>
        <source>the profile adds llama-server options: {args}</source>
        <translation>配置文件添加了 llama-server 选项：{args}</translation>
    </message>
    <message>
        <source>{path}: not a profile: its JSON is nested deeper than {n} levels</source>
        <translation>{path}：不是配置文件：其 JSON 嵌套超过 {n} 层</translation>
    </message>
    <message>
        <source>{where}: {host} is not taken from a profile: where the endpoint listens is this computer's own setting (herd up --host). Remove server.host from the profile.</source>
        <translation>{where}：不从配置文件中采用 {host}：端点监听的地址是本机自己的设置（herd up --host）。请从配置文件中删除 server.host。</translation>
    </message>
    <message>
        <source>llama-server's default</source>
        <translation>llama-server 的默认值</translation>
    </message>
    <message>
        <source>people at once {new} replaces {old}</source>
        <translation>同时服务人数 {new} 取代 {old}</translation>
    </message>
</context>
<context>
    <name>Feedback</name>
    <message>
        <location filename="../../gui/widgets/feedback.py" line="16" />
        <source>Copied ✔</source>
        <translation>已复制 ✔</translation>
    </message>
</context>
<context>
    <name>Transfer</name>
    <message>
        <location filename="../../gui/cluster/launching/transfer.py" line="1" />
        <source>{node}: {got} / {total} MiB</source>
        <translation>{node}：{got} / {total} MiB</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/transfer.py" line="1" />
        <source>done</source>
        <translation>完成</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/transfer.py" line="1" />
        <source>{rate} MiB/s</source>
        <translation>{rate} MiB/秒</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/transfer.py" line="1" />
        <source>{seconds} s left</source>
        <translation>还剩 {seconds} 秒</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/transfer.py" line="1" />
        <source>from cache</source>
        <translation>来自缓存</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/transfer.py" line="1" />
        <source>{cached} MiB from cache</source>
        <translation>{cached} MiB 来自缓存</translation>
    </message>
    <message>
        <location filename="../../gui/cluster/launching/transfer.py" line="1" />
        <source>no bytes from {node} for {seconds} s</source>
        <translation>{node} 已有 {seconds} 秒没有收到数据</translation>
    </message>
</context>
<context>
    <name>LaunchFlow</name>
    <message>
        <source>Measuring the nodes to find the fastest split…</source>
        <translation>正在测量各节点以寻找最快的分层方案…</translation>
    </message>
    <message>
        <source>Could not find the fastest split: %1</source>
        <translation>无法找到最快的分层方案：%1</translation>
    </message>
    <message>
        <source>Fastest keeps all %1 layer slots on this computer: by the measurements, sending each token's activations to the nodes and back costs more time than their share of the work saves.</source>
        <translation>“最快”把全部 %1 个层位留在本机：按测量结果，每个词元把激活值发到节点再取回所花的时间，比节点分担计算所省下的时间更多。</translation>
    </message>
    <message>
        <source>Fastest leaves %1 out: by the measurements, using it would make each token slower.</source>
        <translation>“最快”未使用 %1：按测量结果，用上它会让每个词元更慢。</translation>
    </message>
    <message>
        <source>(%1 run on this computer too, so they add no computing power.)</source>
        <translation>（%1 也运行在本机上，因此不会增加算力。）</translation>
    </message>
    <message>
        <source>Open a model first.</source>
        <translation>请先打开一个模型。</translation>
    </message>
    <message>
        <source>The llama.cpp engine is missing; run herd engine install.</source>
        <translation>缺少 llama.cpp 引擎，请运行 herd engine install。</translation>
    </message>
    <message>
        <source>Stop the cluster first: measuring needs the nodes' workers free.</source>
        <translation>请先停止集群：测量需要节点的工作进程空闲。</translation>
    </message>
    <message>
        <source>The plan does not fit.</source>
        <translation>该方案内存不足。</translation>
    </message>
    <message>
        <source>Not reachable or not paired: %1.</source>
        <translation>无法连接或未配对：%1。</translation>
    </message>
    <message>
        <source>The cluster is running. To use the split shown, press Relaunch with this split on the Split tab, or Stop first.</source>
        <translation>集群正在运行。要使用所示的分层，请在“分层”页按“用此分层重新启动”，或先停止。</translation>
    </message>
    <message>
        <source>llama-herd: %1</source>
        <translation>llama-herd：%1</translation>
    </message>
    <message>
        <source>llama-server stopped: %1</source>
        <translation>llama-server 已停止：%1</translation>
    </message>
    <message>
        <source>The cluster is recovering; the conversation continues once it serves again.</source>
        <translation>集群正在恢复；恢复服务后可继续对话。</translation>
    </message>
    <message>
        <source>Open a model first: Open model… above, or click one under On this PC.</source>
        <translation>请先打开模型：点击上方的“打开模型…”，或在“本机上的模型”中点选一个。</translation>
    </message>
    <message>
        <source>Started without %1: the split was made again over the other devices by their free memory.</source>
        <translation>已在没有 %1 的情况下启动：已按空闲内存在其他设备上重新分层。</translation>
    </message>
    <message>
        <source>The model is still being read; press Start again once the Split tab shows its layers.</source>
        <translation>模型仍在读取中；待“分层”页显示其各层后，再按“启动”。</translation>
    </message>
    <message>
        <source>The split is not ready yet: the Split tab shows why.</source>
        <translation>分层尚未就绪：原因见“分层”页。</translation>
    </message>
    <message>
        <source>herd already serves on port %1 (process %2), so the window uses that endpoint. To start a cluster from here, stop that one first; herd service status says whether the login service runs it.</source>
        <translation>herd 已在端口 %1 上提供服务（进程 %2），因此窗口改用该端点。若要从这里启动集群，请先停止那个集群；herd service status 会说明它是否由登录服务运行。</translation>
    </message>
    <message>
        <source>Measuring speculation with and without…</source>
        <translation>正在测量开启与关闭推测解码的速度…</translation>
    </message>
</context>
<context>
    <name>ProfileActions</name>
    <message>
        <source>Export cluster profile</source>
        <translation>导出集群配置</translation>
    </message>
    <message>
        <source>Open a model first.</source>
        <translation>请先打开一个模型。</translation>
    </message>
    <message>
        <source>Cluster profiles (*.json)</source>
        <translation>集群配置 (*.json)</translation>
    </message>
    <message>
        <source>Saved %1</source>
        <translation>已保存 %1</translation>
    </message>
    <message>
        <source>Import cluster profile</source>
        <translation>导入集群配置</translation>
    </message>
    <message>
        <source>Cluster profiles (*.json);;All files (*)</source>
        <translation>集群配置 (*.json);;所有文件 (*)</translation>
    </message>
    <message>
        <source>Reading %1…</source>
        <translation>正在读取 %1…</translation>
    </message>
</context>
<context>
    <name>Engine</name>
    <message>
        <source>It crashed even without repacking: this engine build does not run on this CPU; rebuild it here with `herd engine install --from-source --force`.</source>
        <translation>关闭重排后它仍然崩溃：这个引擎构建无法在此 CPU 上运行；请在本机用 `herd engine install --from-source --force` 重新构建。</translation>
    </message>
    <message>
        <source>Not checked yet whether llama.cpp's weight repacking is safe on this CPU; herd checks at the first start of llama-server (or run `herd engine probe`).</source>
        <translation>尚未检查 llama.cpp 的权重重排在此 CPU 上是否安全；herd 会在首次启动 llama-server 时检查（或运行 `herd engine probe`）。</translation>
    </message>
    <message>
        <source>On this CPU ({cpu}) llama-server crashes when it repacks host weights ({types}), so herd starts it with --no-repack here: the host's layers then compute without the CPU's repacked kernels (AMX on Intel), which is slower for them; layers on workers are not affected. To check again (after a new engine or BIOS/firmware update): herd engine probe.</source>
        <translation>在此 CPU（{cpu}）上，llama-server 重排主机权重时会崩溃（{types}），因此 herd 在本机以 --no-repack 启动它：主机上的层将不使用 CPU 的重排内核（Intel 上为 AMX）计算，这些层会变慢；工作节点上的层不受影响。如需重新检查（换了引擎或更新了 BIOS/固件后）：herd engine probe。</translation>
    </message>
    <message>
        <source>llama.cpp's weight repacking is safe on this CPU ({cpu}): host layers use its fastest kernels.</source>
        <translation>llama.cpp 的权重重排在此 CPU（{cpu}）上是安全的：主机上的层使用其最快的内核。</translation>
    </message>
</context>
<context>
    <name>Measure</name>
    <message>
        <source>Measuring {who} on this model failed: {what}. Check the node with `herd doctor`; `herd engine status` says what llama.cpp does on this CPU, and herd's log holds llama-server's whole output.</source>
        <translation>测量 {who} 在此模型上的速度失败：{what}。请用 `herd doctor` 检查该节点；`herd engine status` 会说明 llama.cpp 在此 CPU 上的情况，herd 的日志里有 llama-server 的完整输出。</translation>
    </message>
    <message>
        <source>this PC</source>
        <translation>本机</translation>
    </message>
</context>
<context>
    <name>ChatContext</name>
    <message>
        <source>Leaving out the oldest {turns} turn(s) brings it to {after} tokens (the system prompt is kept).</source>
        <translation>不再发送最早的 {turns} 轮对话后，长度为 {after} 个 token（系统提示词保留）。</translation>
    </message>
    <message>
        <source>This conversation is {tokens} tokens long; the server holds {context} per conversation, of which {room} are kept for the reply, so {limit} fit.</source>
        <translation>此对话长 {tokens} 个 token；服务器每个对话可容纳 {context} 个，其中 {room} 个留给回复，因此最多可发送 {limit} 个。</translation>
    </message>
    <message>
        <source>Your message alone does not fit: shorten it, lower Max tokens, or start the cluster with a larger context.</source>
        <translation>仅您这条消息就放不下：请缩短消息、调低“最大 token 数”，或以更大的上下文启动集群。</translation>
    </message>
</context>
<context>
    <name>ChatErrors</name>
    <message>
        <source>The conversation is too long for the server's context. Start a new chat, shorten your message, or start the cluster with a larger context.</source>
        <translation>对话太长，超出了服务器的上下文。请开始新对话、缩短消息，或以更大的上下文启动集群。</translation>
    </message>
    <message>
        <source>The conversation is too long for the server: it is {tokens} tokens and the server holds {context} per conversation. Start a new chat, shorten your message, or start the cluster with a larger context.</source>
        <translation>对话太长，服务器无法处理：它有 {tokens} 个 token，而服务器每个对话只能容纳 {context} 个。请开始新对话、缩短消息，或以更大的上下文启动集群。</translation>
    </message>
    <message>
        <source>The server did not accept the request (HTTP {status}: {detail}). Check the chat's settings, or start a new chat.</source>
        <translation>服务器未接受该请求（HTTP {status}：{detail}）。请检查对话设置，或开始新对话。</translation>
    </message>
    <message>
        <source>The server did not say how much context it holds.</source>
        <translation>服务器没有说明它能容纳多少上下文。</translation>
    </message>
    <message>
        <source>The server failed while answering (HTTP {status}: {detail}). Try again; if it happens again, look at the launch log.</source>
        <translation>服务器在回答时出错（HTTP {status}：{detail}）。请重试；如果再次出现，请查看启动日志。</translation>
    </message>
    <message>
        <source>The server is not ready yet (it may still be loading the model). Try again in a moment. ({detail})</source>
        <translation>服务器尚未就绪（可能仍在加载模型）。请稍后重试。（{detail}）</translation>
    </message>
    <message>
        <source>The server sent something that is not a chat reply ({line}). Is the address that of a llama-server?</source>
        <translation>服务器发来的内容不是对话回复（{line}）。这个地址确实是 llama-server 吗？</translation>
    </message>
    <message>
        <source>The server stopped the reply with an error ({detail}). Try again; if it happens again, look at the launch log.</source>
        <translation>服务器因错误中止了回复（{detail}）。请重试；如果再次出现，请查看启动日志。</translation>
    </message>
    <message>
        <source>no details</source>
        <translation>无详细信息</translation>
    </message>
</context>
<context>
    <name>PinWindow</name>
    <message>
        <source>Close</source>
        <translation>关闭</translation>
    </message>
    <message>
        <source>Copy</source>
        <translation>复制</translation>
    </message>
    <message>
        <source>New PIN</source>
        <translation>新 PIN</translation>
    </message>
    <message>
        <source>On the master: open herd, press Pair on this computer's card and type this PIN.</source>
        <translation>在主控电脑上：打开 herd，在这台电脑的卡片上按“配对”，然后输入此 PIN。</translation>
    </message>
    <message>
        <source>Pairing PIN — llama-herd agent</source>
        <translation>配对 PIN — llama-herd 代理</translation>
    </message>
    <message>
        <source>The PIN belongs to the account the agent runs as: open Show pairing PIN from that account.</source>
        <translation>PIN 属于运行代理的账户：请在该账户下打开“显示配对 PIN”。</translation>
    </message>
    <message>
        <source>This PIN is no longer accepted (it expired or has paired a master). Press New PIN to show another.</source>
        <translation>此 PIN 已不再有效（已过期或已配对过一台主控电脑）。按“新 PIN”显示另一个。</translation>
    </message>
    <message>
        <source>Time left to type it (minutes:seconds). It pairs one master.</source>
        <translation>剩余输入时间（分:秒）。它只能配对一台主控电脑。</translation>
    </message>
    <message>
        <source>Windows did not give administrator rights; the service's PIN is readable by administrators only. Ask an administrator of this PC to open Show pairing PIN.</source>
        <translation>Windows 未授予管理员权限；服务的 PIN 只有管理员可以读取。请让这台电脑的管理员打开“显示配对 PIN”。</translation>
    </message>
    <message>
        <source>enter this PIN on the master within {minutes} minutes; it pairs one master</source>
        <translation>请在 {minutes} 分钟内在主控电脑上输入此 PIN；它只能配对一台主控电脑</translation>
    </message>
    <message>
        <source>no state in {folder}: the service has not started yet (`sc start {service}`)</source>
        <translation>{folder} 中没有状态：服务尚未启动（`sc start {service}`）</translation>
    </message>
    <message>
        <source>no window: no graphical display here (DISPLAY is not set)</source>
        <translation>无法打开窗口：这里没有图形显示（未设置 DISPLAY）</translation>
    </message>
    <message>
        <source>no window: this Python has no tkinter (install python3-tk)</source>
        <translation>无法打开窗口：此 Python 没有 tkinter（请安装 python3-tk）</translation>
    </message>
    <message>
        <source>the PIN is shown here instead</source>
        <translation>PIN 改为显示在这里</translation>
    </message>
    <message>
        <source>the service's state is readable by administrators only: use an administrator terminal</source>
        <translation>服务的状态只有管理员可以读取：请使用管理员终端</translation>
    </message>
</context>
<context>
    <name>LocalModels</name>
    <message>
        <source>herd</source>
        <translation>herd</translation>
    </message>
    <message>
        <source>recent</source>
        <translation>最近使用</translation>
    </message>
</context>
<context>
    <name>ServerArgs</name>
    <message>
        <source>llama-server arguments must be text, not {value}</source>
        <translation>llama-server 参数必须是文本，而不是 {value}</translation>
    </message>
    <message>
        <source>llama-server option {flag} is not accepted: herd sets it itself (the model, the workers and layers, the context, where the endpoint listens, the log level)</source>
        <translation>不接受 llama-server 选项 {flag}：它由 herd 自己设置（模型、工作节点与层、上下文、端点监听地址、日志级别）</translation>
    </message>
    <message>
        <source>llama-server option {flag} is not accepted: it is not one of the tuning options herd passes on (sampling, context, batch, threads, cache, flash attention, slots); options that read or write files, open the endpoint or fetch models are refused — see docs/security.md</source>
        <translation>不接受 llama-server 选项 {flag}：它不属于 herd 会传递的调优选项（采样、上下文、批大小、线程、缓存、Flash Attention、槽位）；读写文件、开放端点或下载模型的选项一律拒绝——参见 docs/security.md</translation>
    </message>
    <message>
        <source>llama-server option {flag} needs a value</source>
        <translation>llama-server 选项 {flag} 需要一个值</translation>
    </message>
    <message>
        <source>llama-server option {flag} takes no value</source>
        <translation>llama-server 选项 {flag} 不接受值</translation>
    </message>
    <message>
        <source>the value of {flag} is too long or holds control characters</source>
        <translation>{flag} 的值过长或含有控制字符</translation>
    </message>
    <message>
        <source>the value of {flag} looks like an option ({value}): give each option separately</source>
        <translation>{flag} 的值看起来像一个选项（{value}）：请分别给出每个选项</translation>
    </message>
    <message>
        <source>{arg} is not a llama-server option (nor the value of one)</source>
        <translation>{arg} 不是 llama-server 选项（也不是某个选项的值）</translation>
    </message>
    <message>
        <source>llama-server option {flag} is not accepted: herd plans speculation itself; choose it with --draft (herd plan, herd up) or in the split editor</source>
        <translation>不接受 llama-server 选项 {flag}：推测解码由 herd 自行规划；请用 --draft（herd plan、herd up）或在拆分编辑器中选择</translation>
    </message>
</context>
<context>
    <name>Transcript</name>
    <message>
        <source>Open link</source>
        <translation>打开链接</translation>
    </message>
    <message>
        <source>Open this address in your browser?

%1</source>
        <translation>要在浏览器中打开这个地址吗？

%1</translation>
    </message>
    <message>
        <source>herd opens only web links (http, https) from a chat. This link goes to:

%1</source>
        <translation>herd 只打开聊天中的网页链接（http、https）。此链接指向：

%1</translation>
    </message>
    <message>
        <source>%1 tok/s</source>
        <translation>%1 token/秒</translation>
    </message>
    <message>
        <source>%1 tokens</source>
        <translation>%1 个 token</translation>
    </message>
    <message>
        <source>Asked again after the interrupted reply above.</source>
        <translation>上面的回复被中断后重新提问。</translation>
    </message>
    <message>
        <source>Assistant</source>
        <translation>助手</translation>
    </message>
    <message>
        <source>Interrupted: %1</source>
        <translation>已中断：%1</translation>
    </message>
    <message>
        <source>You</source>
        <translation>你</translation>
    </message>
    <message>
        <source>failed: %1</source>
        <translation>失败：%1</translation>
    </message>
    <message>
        <source>first token after %1 ms</source>
        <translation>首个 token 用时 %1 毫秒</translation>
    </message>
    <message>
        <source>no reason given</source>
        <translation>未说明原因</translation>
    </message>
    <message>
        <source>stopped</source>
        <translation>已停止</translation>
    </message>
</context>
<context>
    <name>NextStep</name>
    <message>
        <source>Chat</source>
        <translation>对话</translation>
    </message>
    <message>
        <source>Launch ▸ Start</source>
        <translation>“启动”页 ▸ 启动</translation>
    </message>
    <message>
        <source>Next: %1, then %2.</source>
        <translation>下一步：%1，然后%2。</translation>
    </message>
    <message>
        <source>Next: open a model (Open model…, or one under On this PC).</source>
        <translation>下一步：打开模型（“打开模型…”，或“本机上的模型”中的一个）。</translation>
    </message>
    <message>
        <source>Reading the model; its split appears on the Split tab.</source>
        <translation>正在读取模型；其分层将显示在“分层”页。</translation>
    </message>
    <message>
        <source>Running. Next: ask something in %1.</source>
        <translation>运行中。下一步：在%1中提问。</translation>
    </message>
    <message>
        <source>Starting the cluster; %1 opens once it is ready.</source>
        <translation>正在启动集群；就绪后即可%1。</translation>
    </message>
    <message>
        <source>The steps of a first run: open a model, Launch ▸ Start, then Chat.</source>
        <translation>首次运行的步骤：打开模型，“启动”页 ▸ 启动，然后对话。</translation>
    </message>
</context>
<context>
    <name>FrontDoor</name>
    <message>
        <source>cannot listen on {host}:{port} ({why}); another program may use the port: choose another one with --port</source>
        <translation>无法在 {host}:{port} 上监听（{why}）；可能有其他程序占用了该端口：请用 --port 换一个端口</translation>
    </message>
    <message>
        <source>the model is not being served at the moment (it is starting or being relaunched); try again in a few seconds</source>
        <translation>模型暂时没有在提供服务（正在启动或重新启动）；请几秒后再试</translation>
    </message>
    <message>
        <source>the reply was cut: the cluster lost a computer and is relaunching; send the request again in a few seconds</source>
        <translation>回复被中断：集群失去了一台电脑，正在重新启动；请几秒后重新发送请求</translation>
    </message>
    <message>
        <source>the request is larger than {mib} MiB</source>
        <translation>请求大于 {mib} MiB</translation>
    </message>
    <message>
        <source>this endpoint needs a key: make one on the cluster's computer with `herd keys add NAME` and give it to the app as its API key</source>
        <translation>此端点需要密钥：请在集群所在的电脑上用 `herd keys add NAME` 创建一个，并把它作为 API 密钥填入应用</translation>
    </message>
    <message>
        <source>this key is not known here (it may have been revoked); `herd keys list` on the cluster's computer shows the keys</source>
        <translation>此处不认识这个密钥（它可能已被吊销）；在集群所在的电脑上运行 `herd keys list` 可查看所有密钥</translation>
    </message>
    <message>
        <source>{path} is not served to other computers; the endpoint serves the OpenAI API under /v1</source>
        <translation>{path} 不向其他电脑开放；此端点只在 /v1 下提供 OpenAI API</translation>
    </message>
    <message>
        <source>the cluster answers {people} requests at once and {waiting} more are waiting; try again in a few seconds</source>
        <translation>集群同时应答 {people} 个请求，另有 {waiting} 个在排队；请过几秒再试</translation>
    </message>
</context>
<context>
    <name>Keys</name>
    <message>
        <source>"{name}" cannot name a key: use 1 to 40 letters, digits, dots, dashes or underscores, starting with a letter or digit (e.g. phone, open-webui)</source>
        <translation>“{name}”不能作为密钥名称：请使用 1 到 40 个字母、数字、点、短横线或下划线，并以字母或数字开头（例如 phone、open-webui）</translation>
    </message>
    <message>
        <source>a key called {name} exists already; revoke it first (herd keys revoke {name}) or choose another name</source>
        <translation>名为 {name} 的密钥已存在；请先吊销它（herd keys revoke {name}），或换一个名称</translation>
    </message>
    <message>
        <source>{path} is not a llama-herd key file ({why}); move it away and add the keys again</source>
        <translation>{path} 不是 llama-herd 的密钥文件（{why}）；请把它移走，然后重新添加密钥</translation>
    </message>
</context>
<context>
    <name>ChatHistory</name>
    <message>
        <source>A chat's title cannot be empty; type a few words.</source>
        <translation>对话标题不能为空；请输入几个字。</translation>
    </message>
    <message>
        <source>Asked again after the interrupted reply above.</source>
        <translation>上面的回复被中断后重新提问。</translation>
    </message>
    <message>
        <source>Assistant</source>
        <translation>助手</translation>
    </message>
    <message>
        <source>Cannot export a chat as {fmt}: choose Markdown or JSON.</source>
        <translation>无法将对话导出为 {fmt}：请选择 Markdown 或 JSON。</translation>
    </message>
    <message>
        <source>Cannot open the chat history {path} ({why}); check that no other program holds it and that the folder can be written.</source>
        <translation>无法打开对话历史 {path}（{why}）；请确认没有其他程序占用它，并且该文件夹可写。</translation>
    </message>
    <message>
        <source>Could not save this chat to {path} ({why}); it stays on screen. Free some disk space or check the folder's permissions.</source>
        <translation>无法将此对话保存到 {path}（{why}）；它仍显示在屏幕上。请释放一些磁盘空间或检查该文件夹的权限。</translation>
    </message>
    <message>
        <source>Interrupted: {why}</source>
        <translation>已中断：{why}</translation>
    </message>
    <message>
        <source>Left out of later requests so the conversation fits the server's context.</source>
        <translation>之后的请求不再发送此消息，以便对话能放进服务器的上下文。</translation>
    </message>
    <message>
        <source>New chat</source>
        <translation>新对话</translation>
    </message>
    <message>
        <source>System prompt</source>
        <translation>系统提示词</translation>
    </message>
    <message>
        <source>The chat history {path} was written by a newer herd (schema {found}, this one reads {known}); update herd to open it.</source>
        <translation>对话历史 {path} 由更新版本的 herd 写入（结构版本 {found}，本版本只能读取 {known}）；请更新 herd 后再打开。</translation>
    </message>
    <message>
        <source>There is no chat number {id} in the history (it was deleted?).</source>
        <translation>历史中没有编号为 {id} 的对话（可能已被删除？）。</translation>
    </message>
    <message>
        <source>You</source>
        <translation>你</translation>
    </message>
    <message>
        <source>no reason given</source>
        <translation>未说明原因</translation>
    </message>
    <message>
        <source>unknown</source>
        <translation>未知</translation>
    </message>
    <message>
        <source>{date} · model: {model}</source>
        <translation>{date} · 模型：{model}</translation>
    </message>
    <message>
        <source>Cut by a lost worker and continued where it stopped ({why}).</source>
        <translation>被丢失的工作节点中断，已从中断处继续（{why}）。</translation>
    </message>
</context>
<context>
    <name>ChatHistoryList</name>
    <message>
        <source>Could not export the chat: %1</source>
        <translation>无法导出对话：%1</translation>
    </message>
    <message>
        <source>Date</source>
        <translation>日期</translation>
    </message>
    <message>
        <source>Delete</source>
        <translation>删除</translation>
    </message>
    <message>
        <source>Delete chat</source>
        <translation>删除对话</translation>
    </message>
    <message>
        <source>Delete the chat “%1”? It cannot be brought back.</source>
        <translation>删除对话“%1”？删除后无法恢复。</translation>
    </message>
    <message>
        <source>Export chat</source>
        <translation>导出对话</translation>
    </message>
    <message>
        <source>Export…</source>
        <translation>导出…</translation>
    </message>
    <message>
        <source>JSON (*.json)</source>
        <translation>JSON (*.json)</translation>
    </message>
    <message>
        <source>Markdown (*.md)</source>
        <translation>Markdown (*.md)</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>模型</translation>
    </message>
    <message>
        <source>Open</source>
        <translation>打开</translation>
    </message>
    <message>
        <source>Past chats</source>
        <translation>以往的对话</translation>
    </message>
    <message>
        <source>Rename</source>
        <translation>重命名</translation>
    </message>
    <message>
        <source>Search past chats</source>
        <translation>搜索以往的对话</translation>
    </message>
    <message>
        <source>Could not read or write the chat history (%1); check the disk and the permissions of its folder.</source>
        <translation>无法读取或写入对话历史（%1）；请检查磁盘以及其所在文件夹的权限。</translation>
    </message>
    <message>
        <source>More</source>
        <translation>更多</translation>
    </message>
</context>
<context>
    <name>ChatKeeper</name>
    <message>
        <source>Stop the reply first, then open the other chat.</source>
        <translation>请先停止当前回复，再打开另一个对话。</translation>
    </message>
    <message>
        <source>The chat history could not be read; it was moved to %1 and a new one started.</source>
        <translation>无法读取对话历史；已将其移至 %1，并新建了一个。</translation>
    </message>
</context>
<context>
    <name>BackgroundServing</name>
    <message>
        <source>&amp;Ask</source>
        <translation>询问(&amp;A)</translation>
    </message>
    <message>
        <source>&amp;Keep serving in the background</source>
        <translation>在后台继续提供服务(&amp;K)</translation>
    </message>
    <message>
        <source>&amp;Stop the cluster and quit</source>
        <translation>停止集群并退出(&amp;S)</translation>
    </message>
    <message>
        <source>Close llama-herd</source>
        <translation>关闭 llama-herd</translation>
    </message>
    <message>
        <source>Don't ask again (change it under Cluster ▸ When the window is closed)</source>
        <translation>不再询问（可在“集群 ▸ 服务期间关闭窗口时”中更改）</translation>
    </message>
    <message>
        <source>Keep serving in the background</source>
        <translation>在后台继续提供服务</translation>
    </message>
    <message>
        <source>Stop and quit</source>
        <translation>停止并退出</translation>
    </message>
    <message>
        <source>The cluster is serving. herd can keep serving it in the background, or stop llama-server and the workers herd started.</source>
        <translation>集群正在提供服务。herd 可以在后台继续提供服务，也可以停止 llama-server 和 herd 启动的工作进程。</translation>
    </message>
    <message>
        <source>The cluster serves in the background. Use this icon to open the window, stop the cluster or quit.</source>
        <translation>集群正在后台提供服务。使用此图标可打开窗口、停止集群或退出。</translation>
    </message>
    <message>
        <source>This desktop has no system tray, so the window stays minimised while the cluster serves. Quit from the File menu to stop it.</source>
        <translation>此桌面没有系统托盘，因此集群提供服务期间窗口保持最小化。要停止服务，请从“文件”菜单退出。</translation>
    </message>
    <message>
        <source>This desktop has no system tray: in the background the window stays minimised on the taskbar instead.</source>
        <translation>此桌面没有系统托盘：在后台运行时，窗口将改为最小化停留在任务栏上。</translation>
    </message>
    <message>
        <source>When the &amp;window is closed while serving</source>
        <translation>服务期间关闭窗口时(&amp;W)</translation>
    </message>
    <message>
        <source>llama-herd keeps serving</source>
        <translation>llama-herd 继续提供服务</translation>
    </message>
</context>
<context>
    <name>ServingTray</name>
    <message>
        <source>%1 (%2 requests)</source>
        <translation>%1（%2 个请求）</translation>
    </message>
    <message>
        <source>%1 tokens/s</source>
        <translation>%1 token/秒</translation>
    </message>
    <message>
        <source>No requests from other apps yet</source>
        <translation>其他应用尚未发来请求</translation>
    </message>
    <message>
        <source>Not serving (%1)</source>
        <translation>未在服务（%1）</translation>
    </message>
    <message>
        <source>Open</source>
        <translation>打开</translation>
    </message>
    <message>
        <source>Quit</source>
        <translation>退出</translation>
    </message>
    <message>
        <source>Serving %1</source>
        <translation>正在提供 %1</translation>
    </message>
    <message>
        <source>Stop cluster</source>
        <translation>停止集群</translation>
    </message>
    <message>
        <source>Used by: %1</source>
        <translation>使用者：%1</translation>
    </message>
    <message>
        <source>a model</source>
        <translation>一个模型</translation>
    </message>
    <message>
        <source>not running</source>
        <translation>未运行</translation>
    </message>
    <message>
        <source>replies being written now: %1</source>
        <translation>正在生成的回复：%1</translation>
    </message>
    <message>
        <source>this PC</source>
        <translation>本机</translation>
    </message>
</context>
<context>
    <name>ShareDialog</name>
    <message>
        <source>Base URL:</source>
        <translation>基础 URL：</translation>
    </message>
    <message>
        <source>Connect an app</source>
        <translation>连接应用</translation>
    </message>
    <message>
        <source>Copy</source>
        <translation>复制</translation>
    </message>
    <message>
        <source>Copy this key into the app now: it is shown only once. In the app, it goes where an API key is asked for.</source>
        <translation>请现在把这个密钥复制到应用中：它只显示一次。在应用里，把它填到要求 API 密钥的地方。</translation>
    </message>
    <message>
        <source>Keys, one per device</source>
        <translation>密钥（每台设备一个）</translation>
    </message>
    <message>
        <source>Make key</source>
        <translation>生成密钥</translation>
    </message>
    <message>
        <source>Model id:</source>
        <translation>模型 ID：</translation>
    </message>
    <message>
        <source>Not shared now. Press Start (or Stop, then Start) to share the cluster.</source>
        <translation>当前未共享。按“启动”（或先“停止”再“启动”）即可共享集群。</translation>
    </message>
    <message>
        <source>Not shared now. Turn on Share on the LAN, then press Start (or Stop, then Start).</source>
        <translation>当前未共享。请打开“在局域网中共享”，然后按“启动”（或先“停止”再“启动”）。</translation>
    </message>
    <message>
        <source>Phones and other computers of your home can then use the cluster as an OpenAI-compatible server, each with its own key. It takes effect at the next Start.</source>
        <translation>这样家里的手机和其他电脑就能把集群当作兼容 OpenAI 的服务器使用，每台设备使用自己的密钥。下次启动时生效。</translation>
    </message>
    <message>
        <source>Port:</source>
        <translation>端口：</translation>
    </message>
    <message>
        <source>Revoke</source>
        <translation>吊销</translation>
    </message>
    <message>
        <source>Share on the LAN</source>
        <translation>在局域网中共享</translation>
    </message>
    <message>
        <source>Shared: apps on other devices use these, with a key.</source>
        <translation>已共享：其他设备上的应用使用以下信息，并需要密钥。</translation>
    </message>
    <message>
        <source>a name for the device, e.g. phone</source>
        <translation>设备名称，例如 phone</translation>
    </message>
    <message>
        <source>(the app pins or trusts the file %1)</source>
        <translation>（应用需固定或信任文件 %1）</translation>
    </message>
    <message>
        <source>Certificate (SHA-256):</source>
        <translation>证书（SHA-256）：</translation>
    </message>
    <message>
        <source>Over plain HTTP, anyone on your network who reads its traffic can see the keys and the chats. With HTTPS they cannot, but the app must accept herd's own certificate: check that the fingerprint it shows is the one below. Some apps accept no certificate that a public authority did not sign; for those, leave HTTPS off. It takes effect at the next Start.</source>
        <translation>使用普通 HTTP 时，网络中任何能读取流量的人都能看到密钥和聊天内容。使用 HTTPS 则不能，但应用必须接受 herd 自己的证书：请核对应用显示的指纹与下方的指纹一致。有些应用不接受未经公共证书颁发机构签名的证书；对这些应用，请关闭 HTTPS。下次启动时生效。</translation>
    </message>
    <message>
        <source>Use HTTPS (herd's own certificate)</source>
        <translation>使用 HTTPS（herd 自己的证书）</translation>
    </message>
    <message>
        <source>none: plain HTTP, keys cross the network in clear</source>
        <translation>无：普通 HTTP，密钥以明文在网络中传输</translation>
    </message>
</context>
<context>
    <name>Wake</name>
    <message>
        <source>The MAC address of this node is not known yet: herd learns it when it reads the node while it is awake.</source>
        <translation>还不知道此节点的 MAC 地址：herd 会在节点醒着时读取它，从而得知该地址。</translation>
    </message>
    <message>
        <source>Waking {name}… {seconds} s</source>
        <translation>正在唤醒 {name}… {seconds} 秒</translation>
    </message>
</context>
<context>
    <name>DevicesTable</name>
    <message>
        <source>+ output</source>
        <translation>+ 输出层</translation>
    </message>
    <message>
        <source>A mixture-of-experts model: tick a GPU to keep its layers' experts in its PC's RAM. The GPU keeps attention and the shared tensors; a token reads only a few experts, so RAM serves them well and the GPU's memory holds more layers. The tensors between the two pass through this computer: ten round trips to that PC per layer and token, so it suits a wired network.</source>
        <translation>混合专家（MoE）模型：勾选某块 GPU，即把它所承担各层的专家权重放在该电脑的内存中。GPU 保留注意力和共享张量；每个词元只读取少数几个专家，内存足以胜任，GPU 显存便能容纳更多层。两者之间的张量要经过本机中转：每层每个词元需与那台电脑往返十次，因此更适合有线网络。</translation>
    </message>
    <message>
        <source>Device</source>
        <translation>设备</translation>
    </message>
    <message>
        <source>Experts</source>
        <translation>专家</translation>
    </message>
    <message>
        <source>Fit</source>
        <translation>是否够用</translation>
    </message>
    <message>
        <source>Free</source>
        <translation>可用</translation>
    </message>
    <message>
        <source>Holds the experts of %1's layers</source>
        <translation>存放 %1 所承担各层的专家</translation>
    </message>
    <message>
        <source>Keep this GPU's experts in its PC's RAM (its CPU device)</source>
        <translation>把这块 GPU 的专家放在其所在电脑的内存中（该电脑的 CPU 设备）</translation>
    </message>
    <message>
        <source>Layers</source>
        <translation>层</translation>
    </message>
    <message>
        <source>Needs</source>
        <translation>需要</translation>
    </message>
    <message>
        <source>Slots</source>
        <translation>层位数</translation>
    </message>
    <message>
        <source>Untick to leave this device out</source>
        <translation>取消勾选即不使用此设备</translation>
    </message>
    <message>
        <source>Use</source>
        <translation>使用</translation>
    </message>
    <message>
        <source>fits</source>
        <translation>够用</translation>
    </message>
    <message>
        <source>host CPU</source>
        <translation>主控 CPU</translation>
    </message>
    <message>
        <source>in RAM</source>
        <translation>放内存</translation>
    </message>
    <message>
        <source>left out</source>
        <translation>未使用</translation>
    </message>
    <message>
        <source>of layers %1</source>
        <translation>第 %1 层的专家</translation>
    </message>
    <message>
        <source>short by %1</source>
        <translation>还差 %1</translation>
    </message>
</context>
<context>
    <name>LocalDemo</name>
    <message>
        <source>Starting two local workers…</source>
        <translation>正在启动两个本地工作节点…</translation>
    </message>
    <message>
        <source>The local demo could not start: %1</source>
        <translation>本地演示无法启动：%1</translation>
    </message>
</context>
<context>
    <name>ModelActions</name>
    <message>
        <source>Making the demo model…</source>
        <translation>正在生成演示模型…</translation>
    </message>
</context>
<context>
    <name>NodeActions</name>
    <message>
        <source>%1 node(s) found.</source>
        <translation>已找到 %1 个节点。</translation>
    </message>
    <message>
        <source>%1 stopped answering; the running model may fail.</source>
        <translation>%1 已停止响应，正在运行的模型可能会出错。</translation>
    </message>
    <message>
        <source>Added %1.</source>
        <translation>已添加 %1。</translation>
    </message>
    <message>
        <source>Connecting to %1…</source>
        <translation>正在连接 %1…</translation>
    </message>
    <message>
        <source>Could not add %1: %2</source>
        <translation>无法添加 %1：%2</translation>
    </message>
    <message>
        <source>Could not wake %1: %2</source>
        <translation>无法唤醒 %1：%2</translation>
    </message>
    <message>
        <source>Lost contact with %1.</source>
        <translation>与 %1 失去联系。</translation>
    </message>
    <message>
        <source>Paired with %1.</source>
        <translation>已与 %1 配对。</translation>
    </message>
    <message>
        <source>Pairing with %1 failed: %2</source>
        <translation>与 %1 配对失败：%2</translation>
    </message>
    <message>
        <source>Sent %1 a Wake-on-LAN packet (%2); its card turns back on when it answers.</source>
        <translation>已向 %1 发送网络唤醒（Wake-on-LAN）数据包（%2）；它应答后，其卡片会恢复正常。</translation>
    </message>
</context>
<context>
    <name>WindowMenus</name>
    <message>
        <source>%1 s</source>
        <translation>%1 秒</translation>
    </message>
    <message>
        <source>&amp;About llama-herd</source>
        <translation>关于 llama-herd(&amp;A)</translation>
    </message>
    <message>
        <source>&amp;Cluster</source>
        <translation>集群(&amp;C)</translation>
    </message>
    <message>
        <source>&amp;Countdown before relaunching</source>
        <translation>重新启动前的倒计时(&amp;C)</translation>
    </message>
    <message>
        <source>&amp;Export cluster profile…</source>
        <translation>导出集群配置(&amp;E)…</translation>
    </message>
    <message>
        <source>&amp;File</source>
        <translation>文件(&amp;F)</translation>
    </message>
    <message>
        <source>&amp;Help</source>
        <translation>帮助(&amp;H)</translation>
    </message>
    <message>
        <source>&amp;Import cluster profile…</source>
        <translation>导入集群配置(&amp;I)…</translation>
    </message>
    <message>
        <source>&amp;Keyboard shortcuts</source>
        <translation>键盘快捷键(&amp;K)</translation>
    </message>
    <message>
        <source>&amp;Open model…</source>
        <translation>打开模型(&amp;O)…</translation>
    </message>
    <message>
        <source>&amp;Quit</source>
        <translation>退出(&amp;Q)</translation>
    </message>
    <message>
        <source>&amp;Relaunch automatically when a node is lost</source>
        <translation>节点失联时自动重新启动(&amp;R)</translation>
    </message>
    <message>
        <source>&amp;Share…</source>
        <translation>共享(&amp;S)…</translation>
    </message>
    <message>
        <source>&amp;Troubleshooting</source>
        <translation>故障排查(&amp;T)</translation>
    </message>
    <message>
        <source>&lt;b&gt;A node does not appear:&lt;/b&gt; check that herd-agent runs on it (herd-agent pin shows its PIN); where the network blocks discovery, use Add by address… with its IP address.</source>
        <translation>&lt;b&gt;节点没有出现：&lt;/b&gt;请确认它上面正在运行 herd-agent（herd-agent pin 会显示其 PIN）；如果网络阻止了自动发现，请用“按地址添加…”输入它的 IP 地址。</translation>
    </message>
    <message>
        <source>&lt;b&gt;Slow replies:&lt;/b&gt; Fastest measures the nodes and picks the quickest split; a node on Wi-Fi is marked on its card.</source>
        <translation>&lt;b&gt;回复很慢：&lt;/b&gt;“最快”会测量各节点并选出最快的分层；使用 Wi-Fi 的节点会在其卡片上标出。</translation>
    </message>
    <message>
        <source>&lt;b&gt;Start refuses or fails:&lt;/b&gt; the Launch tab lists the checks; in a terminal, herd doctor runs the same checks and herd engine status shows which llama.cpp build is used.</source>
        <translation>&lt;b&gt;无法启动或启动失败：&lt;/b&gt;“启动”页列出了各项检查；在终端中，herd doctor 会运行同样的检查，herd engine status 会显示所用的 llama.cpp 版本。</translation>
    </message>
    <message>
        <source>&lt;b&gt;The model does not fit:&lt;/b&gt; lower the context on the Split tab, or give layers to the devices with memory to spare.</source>
        <translation>&lt;b&gt;模型装不下：&lt;/b&gt;请在“分层”页调低上下文，或把层分给仍有空闲内存的设备。</translation>
    </message>
    <message>
        <source>About llama-herd</source>
        <translation>关于 llama-herd</translation>
    </message>
    <message>
        <source>Ask before using it again</source>
        <translation>重新使用前先询问</translation>
    </message>
    <message>
        <source>At once</source>
        <translation>立即</translation>
    </message>
    <message>
        <source>Focus the previous / next handle</source>
        <translation>选中上一个 / 下一个拖柄</translation>
    </message>
    <message>
        <source>Keyboard shortcuts</source>
        <translation>键盘快捷键</translation>
    </message>
    <message>
        <source>Left / Right</source>
        <translation>左 / 右</translation>
    </message>
    <message>
        <source>Move the focused handle of the layer bar one slot</source>
        <translation>把分层条上选中的拖柄移动一个层位</translation>
    </message>
    <message>
        <source>Open a model</source>
        <translation>打开模型</translation>
    </message>
    <message>
        <source>Platform: %1</source>
        <translation>平台：%1</translation>
    </message>
    <message>
        <source>Qt %1, PySide6 %2, Python %3</source>
        <translation>Qt %1，PySide6 %2，Python %3</translation>
    </message>
    <message>
        <source>Quit (asks first while the cluster serves)</source>
        <translation>退出（集群运行时会先询问）</translation>
    </message>
    <message>
        <source>Send the chat message</source>
        <translation>发送对话消息</translation>
    </message>
    <message>
        <source>Troubleshooting</source>
        <translation>故障排查</translation>
    </message>
    <message>
        <source>Turn the PCs of your home network into one llama.cpp cluster.</source>
        <translation>把家里局域网中的电脑组成一个 llama.cpp 集群。</translation>
    </message>
    <message>
        <source>Undo / redo a split edit</source>
        <translation>撤销 / 重做分层修改</translation>
    </message>
    <message>
        <source>Up / Down</source>
        <translation>上 / 下</translation>
    </message>
    <message>
        <source>Use it again automatically</source>
        <translation>自动重新使用</translation>
    </message>
    <message>
        <source>When a lost node &amp;returns</source>
        <translation>失联节点恢复时(&amp;R)</translation>
    </message>
    <message>
        <source>llama.cpp build: %1 (pinned %2)</source>
        <translation>llama.cpp 版本：%1（固定版本 %2）</translation>
    </message>
</context>
<context>
    <name>ChatInput</name>
    <message>
        <source>Ask something… (Ctrl+Enter sends)</source>
        <translation>输入问题…（Ctrl+Enter 发送）</translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation>取消</translation>
    </message>
    <message>
        <source>Counting the conversation's tokens…</source>
        <translation>正在计算对话的 token 数…</translation>
    </message>
    <message>
        <source>Leave out oldest turns and send</source>
        <translation>去掉最早的几轮并发送</translation>
    </message>
    <message>
        <source>Not sent yet: the conversation is longer than the server can read.</source>
        <translation>尚未发送：对话长度超出了服务器能读取的范围。</translation>
    </message>
    <message>
        <source>Not sent. Your message is still in the box below.</source>
        <translation>未发送。您的消息仍在下方输入框中。</translation>
    </message>
    <message>
        <source>Not sent: wait for the reply to finish, or press Stop. Your message stays in the box.</source>
        <translation>未发送：请等待回复结束，或按“停止”。您的消息仍在输入框中。</translation>
    </message>
    <message>
        <source>Send</source>
        <translation>发送</translation>
    </message>
    <message>
        <source>Stop</source>
        <translation>停止</translation>
    </message>
</context>
<context>
    <name>PeopleBox</name>
    <message>
        <source>Auto</source>
        <translation>自动</translation>
    </message>
    <message>
        <source>How many people (apps, devices) are answered at the same time, each with the whole context; the memory fit grows with them and others wait their turn. Auto: llama-server's default, four sharing one context.</source>
        <translation>同时应答多少人（应用、设备），每人都有完整的上下文；内存估算随人数增长，其余的人排队等候。自动：llama-server 的默认值，四人共享一个上下文。</translation>
    </message>
    <message>
        <source>People at once</source>
        <translation>同时服务人数</translation>
    </message>
</context>
<context>
    <name>ServerOptions</name>
    <message>
        <source>-np in llama-server's further arguments and people at once both set how many are served at once: remove -np and keep people at once</source>
        <translation>llama-server 附加参数中的 -np 和“同时服务人数”都设定了同时服务的数量：请删除 -np，保留“同时服务人数”</translation>
    </message>
    <message>
        <source>people at once must be a whole number from 1 to {most}, not {value}</source>
        <translation>同时服务人数必须是 1 到 {most} 之间的整数，而不是 {value}</translation>
    </message>
</context>
<context>
    <name>UsageTableView</name>
    <message>
        <source>Key</source>
        <translation>密钥</translation>
    </message>
    <message>
        <source>Requests</source>
        <translation>请求数</translation>
    </message>
    <message>
        <source>This PC</source>
        <translation>本机</translation>
    </message>
    <message>
        <source>Tokens in</source>
        <translation>输入 token</translation>
    </message>
    <message>
        <source>Tokens out</source>
        <translation>输出 token</translation>
    </message>
    <message>
        <source>Waiting</source>
        <translation>排队中</translation>
    </message>
    <message>
        <source>Who uses the cluster</source>
        <translation>谁在使用集群</translation>
    </message>
    <message>
        <source>tok/s</source>
        <translation>token/秒</translation>
    </message>
    <message>
        <source>{waiting} (+{busy} answered now)</source>
        <translation>{waiting}（另有 {busy} 个正在应答）</translation>
    </message>
</context>
<context>
    <name>Speculation</name>
    <message>
        <source>a draft model's file goes with speculation by a draft model, and only with it</source>
        <translation>草稿模型文件只能与“草稿模型”推测方式一起使用，且该方式必须给出草稿模型文件</translation>
    </message>
    <message>
        <source>different tokenizer: {draft} vs {target}</source>
        <translation>分词器不同：{draft} 与 {target}</translation>
    </message>
    <message>
        <source>different vocabulary: the same number of tokens ({count}), but not the same tokens</source>
        <translation>词表不同：词元数量相同（{count}），但词元不同</translation>
    </message>
    <message>
        <source>different vocabulary: {draft} tokens vs {target}</source>
        <translation>词表不同：{draft} 个词元与 {target} 个</translation>
    </message>
    <message>
        <source>draft model</source>
        <translation>草稿模型</translation>
    </message>
    <message>
        <source>n-gram lookup</source>
        <translation>n-gram 查找</translation>
    </message>
    <message>
        <source>no model on this PC has the target's vocabulary</source>
        <translation>本机没有与目标模型词表相同的模型</translation>
    </message>
    <message>
        <source>none</source>
        <translation>无</translation>
    </message>
    <message>
        <source>predicted {gain}× the speed without</source>
        <translation>预计为不使用时速度的 {gain} 倍</translation>
    </message>
    <message>
        <source>speculation must be one of {kinds}, not {kind}</source>
        <translation>推测方式必须是 {kinds} 之一，而不是 {kind}</translation>
    </message>
    <message>
        <source>speculation: {kind}</source>
        <translation>推测解码：{kind}</translation>
    </message>
    <message>
        <source>the model carries its own MTP heads</source>
        <translation>该模型自带 MTP 预测头</translation>
    </message>
    <message>
        <source>the model's own MTP heads</source>
        <translation>模型自带的 MTP 预测头</translation>
    </message>
    <message>
        <source>the smallest model on this PC with the target's vocabulary</source>
        <translation>本机上与目标模型词表相同的最小模型</translation>
    </message>
    <message>
        <source>tokens drafted per pass must be a whole number from 1 to {most}, not {value}</source>
        <translation>每轮草拟的词元数必须是 1 到 {most} 的整数，而不是 {value}</translation>
    </message>
    <message>
        <source>too large to draft: {size} MiB against the target's {target} MiB</source>
        <translation>太大，不适合作草稿：{size} MiB，而目标模型为 {target} MiB</translation>
    </message>
    <message>
        <source>{draft} cannot draft for {model}: {why}</source>
        <translation>{draft} 不能为 {model} 作草稿：{why}</translation>
    </message>
    <message>
        <source>{model} carries no multi-token-prediction heads; choose --draft auto, ngram or a draft model</source>
        <translation>{model} 不带多词元预测（MTP）头；请选择 --draft auto、ngram 或一个草稿模型</translation>
    </message>
    <message>
        <source>{path}: the file has no vocabulary (no tokenizer.ggml.model and tokenizer.ggml.tokens keys)</source>
        <translation>{path}：该文件没有词表（缺少 tokenizer.ggml.model 和 tokenizer.ggml.tokens 键）</translation>
    </message>
    <message>
        <source>{where} must be an object</source>
        <translation>{where} 必须是一个对象</translation>
    </message>
    <message>
        <source>{where}.draft must be the path of a model file</source>
        <translation>{where}.draft 必须是模型文件的路径</translation>
    </message>
    <message>
        <source>{where}.predicted_gain must be a positive number</source>
        <translation>{where}.predicted_gain 必须是正数</translation>
    </message>
    <message>
        <source>{where}.reason must be a short text</source>
        <translation>{where}.reason 必须是简短文本</translation>
    </message>
    <message>
        <source>{where}: unknown field {field}</source>
        <translation>{where}：未知字段 {field}</translation>
    </message>
    <message>
        <source>measured {gain}× ({without} → {with_} tokens/s)</source>
        <translation>实测 {gain} 倍（{without} → {with_} 词元/秒）</translation>
    </message>
    <message>
        <source>the trial request to {url} failed ({why})</source>
        <translation>发往 {url} 的试测请求失败（{why}）</translation>
    </message>
    <message>
        <source>{measured}: faster, so it is on. {why}</source>
        <translation>{measured}：更快，因此启用。{why}</translation>
    </message>
    <message>
        <source>{url} answered the trial request with HTTP {status} and no timings</source>
        <translation>{url} 对试测请求的回应为 HTTP {status}，且没有计时数据</translation>
    </message>
    <message>
        <source>draft model {name}, {n} tokens per pass</source>
        <translation>草稿模型 {name}，每轮 {n} 个词元</translation>
    </message>
    <message>
        <source>{kind}: {measured}, not faster, so it stays off. {why}</source>
        <translation>{kind}：{measured}，并未更快，因此保持关闭。{why}</translation>
    </message>
    <message>
        <source>{kind}: {measured}, but no drafted token was accepted, so it stays off. {why}</source>
        <translation>{kind}：{measured}，但没有任何草稿词元被接受，因此保持关闭。{why}</translation>
    </message>
    <message>
        <source>Fastest: trying speculation by {kind} against none on the planned cluster…</source>
        <translation>最快：正在规划的集群上比较推测解码（{kind}）与不推测的速度…</translation>
    </message>
    <message>
        <source>the trial of speculation by {kind} failed: {why}</source>
        <translation>推测解码（{kind}）的试运行失败：{why}</translation>
    </message>
    <message>
        <source>{model} carries no multi-token-prediction heads</source>
        <translation>{model} 不含多词元预测（MTP）头</translation>
    </message>
    <message>
        <source>Fastest: starting the cluster with speculation by {kind} and measuring it…</source>
        <translation>最快：正在以推测解码（{kind}）启动集群并测量…</translation>
    </message>
    <message>
        <source>Fastest: starting the cluster without speculation and measuring it…</source>
        <translation>最快：正在不用推测解码启动集群并测量…</translation>
    </message>
    <message>
        <source>Fastest: measuring {kind}: {done} of {total} measurements done…</source>
        <translation>最快：正在测量{kind}：已完成 {done}/{total} 次测量…</translation>
    </message>
    <message>
        <source>without speculation</source>
        <translation>不使用推测解码</translation>
    </message>
</context>
<context>
    <name>AcceptanceLine</name>
    <message>
        <source>Last reply: %1 tokens/s effective.</source>
        <translation>上一条回复：有效速度 %1 词元/秒。</translation>
    </message>
    <message>
        <source>Speculation: %1 % of drafted tokens accepted (%2 of %3).</source>
        <translation>推测解码：已接受 %1 % 的草稿词元（%3 个中的 %2 个）。</translation>
    </message>
</context>
<context>
    <name>SpeculationGain</name>
    <message>
        <source>A link's round trip cannot be negative: measure the links again.</source>
        <translation>链路的往返时间不能为负数：请重新测量链路。</translation>
    </message>
    <message>
        <source>Every speculation measurement must be a number; one is missing or infinite.</source>
        <translation>推测解码的每项测量值都必须是数字；有一项缺失或为无穷大。</translation>
    </message>
    <message>
        <source>No measured pair of runs to compare.</source>
        <translation>没有可供比较的成对测量结果。</translation>
    </message>
    <message>
        <source>One token's compute must take some time, got {ms} ms: measure the cluster again.</source>
        <translation>一个词元的计算必然需要时间，得到的却是 {ms} 毫秒：请重新测量集群。</translation>
    </message>
    <message>
        <source>Predicted {gain}× as fast, so slower: drafting takes longer than the accepted tokens save. A smaller draft model or n-gram lookup may do better.</source>
        <translation>预计速度为 {gain}×，即更慢：起草所花的时间多于被接受的词元所节省的时间。更小的草稿模型或 n-gram 查找可能效果更好。</translation>
    </message>
    <message>
        <source>Predicted {gain}× as fast, so slower: the links are fast next to the compute, and verifying several tokens costs more compute than the round trips it saves.</source>
        <translation>预计速度为 {gain}×，即更慢：与计算相比链路很快，验证多个词元所多花的计算超过了它省下的往返时间。</translation>
    </message>
    <message>
        <source>Predicted {gain}× as fast, so slower: too few drafted tokens are accepted to pay for verifying them. A draft that agrees more often with the model would help.</source>
        <translation>预计速度为 {gain}×，即更慢：被接受的草稿词元太少，抵不上验证它们的开销。与该模型更常一致的草稿会有帮助。</translation>
    </message>
    <message>
        <source>Predicted {gain}× as fast: the round trips are paid once for several tokens.</source>
        <translation>预计速度为 {gain}×：多个词元只需支付一次往返时间。</translation>
    </message>
    <message>
        <source>Speculation drafts at least one token per pass, got {n}.</source>
        <translation>推测解码每轮至少起草一个词元，得到的是 {n}。</translation>
    </message>
    <message>
        <source>The acceptance length must lie between 1 (no draft accepted) and {most} (every drafted token and the target's own), got {length}.</source>
        <translation>接受长度必须介于 1（没有草稿被接受）和 {most}（所有草稿词元加上目标模型自己的词元）之间，得到的是 {length}。</translation>
    </message>
    <message>
        <source>The draft's time per token cannot be negative, got {ms} ms.</source>
        <translation>草稿模型每个词元的时间不能为负数，得到的是 {ms} 毫秒。</translation>
    </message>
    <message>
        <source>Verifying several tokens cannot cost less than one token, got a ratio of {ratio}: measure the verify pass again.</source>
        <translation>验证多个词元的开销不可能少于一个词元，得到的比值是 {ratio}：请重新测量验证过程。</translation>
    </message>
    <message>
        <source>Without speculation a token costs {compute} ms of compute and {links} ms of round trips, one to each device that holds layers. With it, a pass costs {verify} ms to verify {n_draft} drafted tokens, {draft} ms to draft them and the same {links} ms of round trips once, and yields {length} tokens on average.</source>
        <translation>不用推测解码时，每个词元需要 {compute} 毫秒计算和 {links} 毫秒往返时间（每个承载层的设备一次）。使用时，每一轮需要 {verify} 毫秒验证 {n_draft} 个草稿词元、{draft} 毫秒起草它们，以及同样的 {links} 毫秒往返时间（只需一次），平均产出 {length} 个词元。</translation>
    </message>
    <message>
        <source>The output layer's share of a token's compute must lie between 0 and 1, got {share}.</source>
        <translation>输出层在一个词元计算中所占的比例必须介于 0 和 1 之间，得到的是 {share}。</translation>
    </message>
    <message>
        <source>The timed batch must hold at least 2 tokens, got {n}.</source>
        <translation>计时的批次至少要有 2 个词元，得到的是 {n}。</translation>
    </message>
    <message>
        <source>Without speculation a token costs {compute} ms of compute and {links} ms of round trips, one to each device that holds layers. With it, a pass costs {verify} ms to verify up to {n_draft} tokens looked up in the text so far and the same {links} ms of round trips once, and yields {length} tokens on average.</source>
        <translation>不用推测解码时，每个词元需要 {compute} 毫秒计算和 {links} 毫秒往返时间（每个承载层的设备一次）。使用时，每一轮需要 {verify} 毫秒验证最多 {n_draft} 个从已有文本中查找到的词元，以及同样的 {links} 毫秒往返时间（只需一次），平均产出 {length} 个词元。</translation>
    </message>
</context>
<context>
    <name>DoorCertificate</name>
    <message>
        <source>cannot write the front door's certificate in {folder} ({why}); check that the folder is yours and not full</source>
        <translation>无法在 {folder} 中写入前门的证书（{why}）；请检查该文件夹属于你且磁盘未满</translation>
    </message>
    <message>
        <source>{path} is not a usable private key ({why}); move it away and herd makes a new one (apps that pinned the old certificate must then get the new one)</source>
        <translation>{path} 不是可用的私钥（{why}）；把它移走，herd 会生成新的私钥（之前固定了旧证书的应用随后需要获取新证书）</translation>
    </message>
    <message>
        <source>{path} is not an EC private key; move it away and herd makes a new one</source>
        <translation>{path} 不是 EC 私钥；把它移走，herd 会生成新的私钥</translation>
    </message>
</context>
<context>
    <name>SpeculationActions</name>
    <message>
        <source>Speculation is off: %1</source>
        <translation>推测解码已关闭：%1</translation>
    </message>
    <message>
        <source>off</source>
        <translation>关闭</translation>
    </message>
</context>
<context>
    <name>SpeculationChoice</name>
    <message>
        <source>Auto</source>
        <translation>自动</translation>
    </message>
    <message>
        <source>Auto (%1)</source>
        <translation>自动（%1）</translation>
    </message>
    <message>
        <source>MTP heads</source>
        <translation>MTP 头</translation>
    </message>
    <message>
        <source>N-gram look-up</source>
        <translation>n-gram 查找</translation>
    </message>
    <message>
        <source>Not a draft for this model:</source>
        <translation>不能作为此模型的草稿模型：</translation>
    </message>
    <message>
        <source>Not a draft for this model: %1</source>
        <translation>不能作为此模型的草稿模型：%1</translation>
    </message>
    <message>
        <source>Off</source>
        <translation>关闭</translation>
    </message>
    <message>
        <source>Speculation</source>
        <translation>推测解码</translation>
    </message>
    <message>
        <source>Speculative decoding: a small model drafts tokens the cluster verifies together, paying the network's round trips once</source>
        <translation>推测解码：由小模型起草若干词元，集群一次验证多个，网络往返只需付一次</translation>
    </message>
</context>
</TS>
