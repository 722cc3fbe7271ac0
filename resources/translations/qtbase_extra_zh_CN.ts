<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<!-- Qt's own strings that Qt's qtbase_zh_CN.qm (shipped with PySide6) does not translate: its
     catalogue has "Look in:" but the file dialog asks for "&Look in:". Loaded after qtbase_zh_CN
     by gui/translations.py, so it is asked first and answers only these. -->
<TS version="2.1" language="zh_CN">
<context>
    <name>QFileDialog</name>
    <message>
        <source>&amp;Look in:</source>
        <translation>查找范围(&amp;L)：</translation>
    </message>
    <message>
        <source>Files of &amp;type:</source>
        <translation>文件类型(&amp;T)：</translation>
    </message>
</context>
</TS>
